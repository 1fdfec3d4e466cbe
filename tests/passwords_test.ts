import assert from "node:assert/strict";
import { HttpError } from "../src/errors.ts";
import { createLimiter, createPasswordHasher } from "../src/passwords.ts";

Deno.test("createPasswordHasher() stores an argon2id PHC string with OWASP parameters", async () => {
  const hasher = createPasswordHasher();
  const hash = await hasher.hash("correct horse");
  assert.match(hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
  assert.equal(await hasher.verify(hash, "correct horse"), true);
  assert.equal(await hasher.verify(hash, "correct horse "), false);
});

Deno.test("verify() with no hash does the work and returns false", async () => {
  const hasher = createPasswordHasher();
  assert.equal(await hasher.verify(undefined, "anything"), false);
});

Deno.test("verify() returns false for a malformed stored hash", async () => {
  assert.equal(await createPasswordHasher().verify("not-a-phc-string", "x"), false);
});

Deno.test("createLimiter() runs at most N at once and refuses beyond the queue with 503", async () => {
  const limit = createLimiter(2, 1);
  let running = 0;
  let peak = 0;
  const releases: (() => void)[] = [];
  const task = () =>
    limit(async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise<void>((resolve) => releases.push(resolve));
      running--;
    });
  const tasks = [task(), task(), task()];
  await assert.rejects(task(), (error: HttpError) => {
    assert.equal(error.status, 503);
    assert.equal(error.headers.get("retry-after"), "1");
    return true;
  });
  while (releases.length > 0 || running > 0) {
    releases.shift()?.();
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(tasks);
  assert.equal(peak, 2);
});
