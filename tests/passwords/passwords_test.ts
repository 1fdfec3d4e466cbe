/**
 * createPasswordHasher(): argon2id hashes and their verification, the dummy hash, the hard
 * cap and closing (its worker pool: hash_workers_test.ts; admission: admission_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  createPasswordHasher,
  DUMMY_HASH,
  PasswordPoolBusy,
} from "../../src/passwords/passwords.ts";

Deno.test("createPasswordHasher() stores an argon2id PHC string with OWASP parameters", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    const hash = await hasher.hash("correct horse");
    assert.match(hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    assert.equal(await hasher.verify(hash, "correct horse"), true);
    assert.equal(await hasher.verify(hash, "correct horse "), false);
  } finally {
    hasher.close();
  }
});

Deno.test("verify() with no hash does the work and returns false", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    assert.equal(await hasher.verify(undefined, "anything"), false);
  } finally {
    hasher.close();
  }
});

Deno.test("verify() returns false for a malformed stored hash", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    assert.equal(await hasher.verify("not-a-phc-string", "x"), false);
  } finally {
    hasher.close();
  }
});

Deno.test("createPasswordHasher() runs jobs on every worker at once and answers each its own", async () => {
  const hasher = createPasswordHasher({ workers: 2, queue: 16 });
  try {
    const passwords = ["a", "b", "c", "d", "e", "f"];
    const hashes = await Promise.all(passwords.map((p) => hasher.hash(p)));
    const checks = await Promise.all(
      passwords.flatMap((
        p,
        i,
      ) => [hasher.verify(hashes[i], p), hasher.verify(hashes[(i + 1) % 6], p)]),
    );
    assert.deepEqual(checks, passwords.flatMap(() => [true, false]));
  } finally {
    hasher.close();
  }
});

Deno.test("createPasswordHasher() refuses beyond its hard cap on waiting jobs, at once", async () => {
  const hasher = createPasswordHasher({ workers: 1, queue: 1 });
  try {
    const running = hasher.hash("one");
    const queued = hasher.hash("two");
    await assert.rejects(hasher.hash("three"), (error: PasswordPoolBusy) => {
      // The login flow answers it with 503 service_busy and this Retry-After.
      assert.ok(error instanceof PasswordPoolBusy);
      assert.equal(error.retryAfterSeconds, 1);
      assert.match(error.message, /Too many logins in progress/);
      return true;
    });
    assert.match(await running, /^\$argon2id\$/);
    assert.match(await queued, /^\$argon2id\$/);
    // With the queue drained, work is accepted again.
    assert.match(await hasher.hash("four"), /^\$argon2id\$/);
  } finally {
    hasher.close();
  }
});

Deno.test("close() rejects pending and later calls", async () => {
  const hasher = createPasswordHasher({ workers: 1, queue: 4 });
  const pending = hasher.hash("x");
  hasher.close();
  await assert.rejects(pending, /closed/);
  await assert.rejects(hasher.hash("y"), /closed/);
});

Deno.test("the dummy hash has the same argon2id parameters as every stored hash", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    const stored = await hasher.hash("x");
    const parameters = (hash: string) => hash.split("$").slice(1, 4).join("$");
    assert.equal(parameters(DUMMY_HASH), parameters(stored));
  } finally {
    hasher.close();
  }
});

Deno.test("verify() for an unknown user keeps answering false after a refusal for a full queue", async () => {
  const hasher = createPasswordHasher({ workers: 1, queue: 0 });
  try {
    const busy = hasher.hash("busy");
    await assert.rejects(
      hasher.verify(undefined, "x"),
      (error) => error instanceof PasswordPoolBusy,
    );
    await busy;
    assert.equal(await hasher.verify(undefined, "x"), false);
  } finally {
    hasher.close();
  }
});
