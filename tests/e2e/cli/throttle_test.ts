import assert from "node:assert/strict";
import { runAdmin } from "../../_helpers/admin_cli.ts";
import { hashSecret } from "../../../src/auth/credentials.ts";
import { openSqliteStore } from "../../../src/store/sqlite/sqlite_store.ts";
import {
  ACCOUNT_THROTTLE,
  CLIENT_THROTTLE,
  nextFailures,
  toAccountSubject,
  toClientSubject,
} from "../../../src/auth/throttle.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { openTestStore } from "../../_helpers/store.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";

function admin(dbPath: string, args: string[]) {
  return runAdmin(dbPath, args, { password: "unused" });
}

Deno.test("admin throttle list and clear show and forget failed-login counters", async () => {
  const db = tempDbPath();
  try {
    const now = createFakeClock().now();
    const store = openSqliteStore(db.path);
    const user = await store.insertUser({
      email: "alice@example.org",
      passwordHash: "x",
      tokenTimeoutSeconds: null,
    }, { now: now, audit: undefined });
    const key = await store.insertApiKey({
      userId: user.id,
      keyHash: hashSecret("k"),
      prefix: "abcd1234",
      label: "",
    }, { now: now, audit: undefined });
    const fail = async (subject: string, times: number) => {
      const rule = subject.startsWith("key:") ? ACCOUNT_THROTTLE : CLIENT_THROTTLE;
      for (let i = 0; i < times; i++) {
        await store.recordLoginFailures([subject], {
          now: now,
          next: (previous) => nextFailures(previous, subject, rule, now),
          audit: undefined,
        });
      }
    };
    await fail(toAccountSubject(key.id), 6);
    await fail(toClientSubject("2001:db8::5"), 3);
    await store.closeStore();

    const listed = await admin(db.path, ["throttle", "list", "--json"]);
    assert.equal(listed.code, 0, listed.err);
    assert.deepEqual(JSON.parse(listed.out), [
      {
        subject: `key ${key.id} (abcd1234…, alice@example.org)`,
        failures: 6,
        blocked_for: "2s",
        last_failure_at: "2026-01-01T00:00:00.000Z",
      },
      {
        subject: "client:2001:db8:0:0::/64",
        failures: 3,
        blocked_for: "-",
        last_failure_at: "2026-01-01T00:00:00.000Z",
      },
    ]);

    const byEmail = await admin(db.path, ["throttle", "clear", "Alice@example.org"]);
    assert.equal(
      byEmail.out,
      "Cleared 1 failed-login counter(s) of alice@example.org",
    );
    const address = await admin(db.path, ["throttle", "clear", "2001:db8::ffff"]);
    assert.equal(address.out, "Cleared 1 failed-login counter(s) of 2001:db8:0:0::/64");
    const again = await admin(db.path, ["throttle", "clear", "192.0.2.1"]);
    assert.equal(again.out, "No failed-login counter for 192.0.2.1");
    assert.equal((await admin(db.path, ["throttle", "list"])).out, "(none)");
    const missing = await admin(db.path, ["throttle", "clear"]);
    assert.equal(missing.code, 2);
    assert.equal(
      missing.err,
      "keygate admin: Missing TARGET (usage: deno task admin throttle clear TARGET)",
    );
  } finally {
    db.cleanup();
  }
});

Deno.test("admin throttle clear forgets an address's operator sign-in counter (admin:ADDRESS)", async () => {
  const db = tempDbPath();
  try {
    const now = createFakeClock().now();
    const store = openSqliteStore(db.path);
    const fail = async (subject: string, times: number) => {
      for (let i = 0; i < times; i++) {
        await store.recordLoginFailures([subject], {
          now,
          next: (previous) => nextFailures(previous, subject, CLIENT_THROTTLE, now),
          audit: undefined,
        });
      }
    };
    await fail("admin:127.0.0.1", 5);
    await fail("client:127.0.0.1", 2);
    await fail("admin:192.0.2.7", 1);
    await store.closeStore();

    // A bare address clears both of its counters, logins and operator sign-ins.
    const both = await admin(db.path, ["throttle", "clear", "127.0.0.1"]);
    assert.equal(both.code, 0, both.err);
    assert.equal(both.out, "Cleared 2 failed-login counter(s) of 127.0.0.1");
    // A subject as throttle list prints it clears that one counter.
    const one = await admin(db.path, ["throttle", "clear", "admin:192.0.2.7"]);
    assert.equal(one.out, "Cleared 1 failed-login counter(s) of admin:192.0.2.7");
    const none = await admin(db.path, ["throttle", "clear", "client:192.0.2.7"]);
    assert.equal(none.out, "No failed-login counter for client:192.0.2.7");
    assert.equal((await admin(db.path, ["throttle", "list"])).out, "(none)");
    const reopened = openSqliteStore(db.path);
    try {
      const audit = await reopened.searchAudit({ limit: 10, action: "throttle.cleared" });
      assert.deepEqual(
        audit.map((entry) => [entry.subject, entry.detail]).reverse(),
        [
          ["address:127.0.0.1", { counters: 2 }],
          ["admin:192.0.2.7", { counters: 1 }],
          ["client:192.0.2.7", { counters: 0 }],
        ],
      );
    } finally {
      await reopened.closeStore();
    }
  } finally {
    db.cleanup();
  }
});

/** `deno task admin ARGS` as a child process on the test backend's store at `location`. */
async function adminTask(location: string, args: string[]) {
  const where = /^postgres(ql)?:\/\//.test(location) ? "--store" : "--db";
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["task", "-q", "admin", ...args, where, location],
    env: { USER: "ops" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes).trimEnd();
  return { code: output.code, out: text(output.stdout), err: text(output.stderr) };
}

Deno.test("[cli] deno task admin throttle clear admin:ADDRESS and ADDRESS, as a process", async () => {
  await using opened = await openTestStore();
  const now = Date.now();
  for (const [subject, times] of [["admin:127.0.0.1", 5], ["client:127.0.0.1", 1]] as const) {
    for (let i = 0; i < times; i++) {
      await opened.store.recordLoginFailures([subject], {
        now,
        next: (previous) => nextFailures(previous, subject, CLIENT_THROTTLE, now),
        audit: undefined,
      });
    }
  }
  const listed = await adminTask(opened.path, ["throttle", "list", "--json"]);
  assert.equal(listed.code, 0, listed.err);
  assert.deepEqual(
    JSON.parse(listed.out).map((row: { subject: string }) => row.subject).sort(),
    ["admin:127.0.0.1", "client:127.0.0.1"],
  );
  const one = await adminTask(opened.path, ["throttle", "clear", "admin:127.0.0.1"]);
  assert.equal(one.code, 0, one.err);
  assert.equal(one.out, "Cleared 1 failed-login counter(s) of admin:127.0.0.1");
  const rest = await adminTask(opened.path, ["throttle", "clear", "127.0.0.1"]);
  assert.equal(rest.out, "Cleared 1 failed-login counter(s) of 127.0.0.1");
  assert.deepEqual(await opened.store.listLoginFailures(now), []);
  const audit = await opened.store.searchAudit({ limit: 2, action: "throttle.cleared" });
  assert.deepEqual(audit.map((entry) => [entry.actor, entry.subject]), [
    ["cli:ops", "address:127.0.0.1"],
    ["cli:ops", "admin:127.0.0.1"],
  ]);
});
