/**
 * The store contract, part 3: logins (the user and key read together with their
 * failed-login counters, a token refused while a counter blocks) and the counters of failed
 * logins.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreBlocked } from "../../src/store/errors.ts";
import type { LoginFailures } from "../../src/store/store.ts";
import {
  anonymizing,
  type ContractTest,
  entry,
  grantOf,
  HOUR,
  NO_AUDIT,
  seed,
  T0,
} from "./_contract_fixtures.ts";

/** Registers the login and login-failure tests. */
export function registerLoginTests(test: ContractTest): void {
  registerLoginReadTests(test);
  registerLoginFailureTests(test);
}

/** A login's first read: the user, the key and the counters asked for, in one call. */
function registerLoginReadTests(test: ContractTest): void {
  test("login: findUserAndKey() reads the user and the key together, either or both absent", async ({ store }) => {
    const { user, key } = await seed(store);
    const other = await store.insertUser(
      { email: "c@d.org", passwordHash: "$argon2id$y", tokenTimeoutSeconds: 60 },
      { now: T0, ...NO_AUDIT },
    );
    const both = await store.findUserAndKey("a@b.org", hashSecret("k1"));
    assert.deepEqual(both, {
      user: await store.findUserByEmail("a@b.org"),
      key: await store.findApiKeyByHash(hashSecret("k1")),
      failures: [],
    });
    assert.equal(both.user?.id, user.id);
    assert.equal(both.key?.id, key.id);
    // Each is read on its own: a key of another user is returned as it is.
    const foreign = await store.findUserAndKey("c@d.org", hashSecret("k1"));
    assert.deepEqual(foreign.user, other);
    assert.equal(foreign.key?.userId, user.id);
    const userOnly = await store.findUserAndKey("a@b.org", hashSecret("nope"));
    assert.equal(userOnly.user?.id, user.id);
    assert.equal(userOnly.key, undefined);
    const keyOnly = await store.findUserAndKey("x@y.org", hashSecret("k1"));
    assert.equal(keyOnly.user, undefined);
    assert.equal(keyOnly.key?.id, key.id);
    assert.deepEqual(await store.findUserAndKey("a\0@b.org", hashSecret("nope")), {
      user: undefined,
      key: undefined,
      failures: [],
    });
  });

  test("login: findUserAndKey() reads the counters asked for: the subjects' and the found key's", async ({ store }) => {
    const { key } = await seed(store);
    const count = (subjects: string[], now: number) =>
      store.recordLoginFailures(subjects, {
        now,
        next: (previous, subject) => ({
          subject,
          failures: (previous?.failures ?? 0) + 1,
          lastFailureAt: now,
          blockedUntil: now + 50,
          forgetAt: now + 1000,
        }),
        audit: undefined,
      });
    await count(["client:a", `key:${key.id}`], T0);
    await count(["client:a", `key:${key.id + 1}`], T0 + 1);
    await count(["client:b"], T0);
    await count(["client:old"], T0 - 5000); // forgotten by T0 - 4000
    const read = { subjects: ["client:old", "client:a"], keySubjectPrefix: "key:", now: T0 + 10 };
    const found = await store.findUserAndKey("a@b.org", hashSecret("k1"), read);
    // Sorted by subject; another key's counter, another client's and a forgotten one left out.
    assert.deepEqual(found.failures, [
      {
        subject: "client:a",
        failures: 2,
        lastFailureAt: T0 + 1,
        blockedUntil: T0 + 51,
        forgetAt: T0 + 1001,
      },
      {
        subject: `key:${key.id}`,
        failures: 1,
        lastFailureAt: T0,
        blockedUntil: T0 + 50,
        forgetAt: T0 + 1000,
      },
    ]);
    assert.equal(found.key?.id, key.id);
    // No key found: the subjects' alone. No subjects: the key's alone.
    const noKey = await store.findUserAndKey("a@b.org", hashSecret("nope"), read);
    assert.deepEqual(noKey.failures.map((row) => row.subject), ["client:a"]);
    const keyOnly = await store.findUserAndKey("x@y.org", hashSecret("k1"), {
      ...read,
      subjects: [],
    });
    assert.deepEqual(keyOnly.failures.map((row) => row.subject), [`key:${key.id}`]);
    // Past their window, none.
    const later = await store.findUserAndKey("a@b.org", hashSecret("k1"), {
      ...read,
      now: T0 + 2000,
    });
    assert.deepEqual(later.failures, []);
    // Nothing asked, nothing read.
    assert.deepEqual((await store.findUserAndKey("a@b.org", hashSecret("k1"))).failures, []);
    await assert.rejects(
      store.findUserAndKey("a@b.org", hashSecret("k1"), { ...read, subjects: ["a", "b", "c"] }),
      RangeError,
    );
  });
}

/** Blocked logins and the failed-login counters. */
function registerLoginFailureTests(test: ContractTest): void {
  test("login: insertToken() with unlessBlocked writes nothing while a counter blocks", async ({ store }) => {
    const { user, key } = await seed(store);
    const before = await store.countRows("tokens");
    const block = (blockedUntil: number, forgetAt: number) =>
      store.recordLoginFailures(["key:9"], {
        now: T0,
        next: (_previous, subject) => ({
          subject,
          failures: 5,
          lastFailureAt: T0,
          blockedUntil,
          forgetAt,
        }),
        audit: entry("login.failed", "user:a@b.org"),
      });
    const insert = (token: string, now: number, maxLiveTokens = 100) =>
      store.insertToken({
        tokenHash: hashSecret(token),
        userId: user.id,
        apiKeyId: key.id,
        issuedAt: T0,
        expiresAt: T0 + HOUR,
        maxLiveTokens,
        userCutoff: user.tokensValidFrom,
      }, {
        audit: entry("token.issued", "user:a@b.org"),
        clearLoginFailures: ["key:9"],
        unlessBlocked: { subjects: ["client:1.2.3.4", "key:9"], now },
      });
    await block(T0 + 5000, T0 + HOUR);
    const audited = (await store.listAudit()).length;
    const epoch = store.readGrantEpoch();
    // With a cap of one, the insert would revoke the seed's token t1: refused, it revokes nothing.
    await assert.rejects(insert("blocked", T0 + 10, 1), (error: unknown) => {
      assert.ok(error instanceof StoreBlocked);
      assert.equal(error.blockedUntil, T0 + 5000);
      return true;
    });
    // Nothing written: no token, no audit row, the counter kept, t1 live, the epoch unmoved.
    assert.equal(await store.countRows("tokens"), before);
    assert.notEqual(await grantOf(store, "t1", "k1", T0 + 10), undefined);
    assert.deepEqual(store.readGrantEpoch(), epoch);
    assert.equal((await store.listAudit()).length, audited);
    assert.equal((await store.findLoginFailures(["key:9"], T0 + 10))[0]?.failures, 5);
    // Once the block has passed the token is stored and the counter cleared with it.
    const id = await insert("after", T0 + 5000);
    assert.equal(await store.countRows("tokens"), before + 1);
    assert.deepEqual(await store.findLoginFailures(["key:9"], T0 + 5000), []);
    assert.equal((await store.listAudit()).at(-1)?.detail.token_id, id);
    // A counter past its window blocks nothing, whatever its blockedUntil says.
    await block(T0 + HOUR, T0 + 100);
    await insert("forgotten", T0 + 200);
    assert.equal(await store.countRows("tokens"), before + 2);
  });

  test("login failures: counted per subject, forgotten after their window, cleared", async ({ store }) => {
    const next = (now: number) => (previous: LoginFailures | undefined, subject: string) => ({
      subject,
      failures: (previous?.failures ?? 0) + 1,
      lastFailureAt: now,
      blockedUntil: 0,
      forgetAt: now + 1000,
    });
    const record = (subjects: string[], now: number) =>
      store.recordLoginFailures(subjects, {
        now,
        next: next(now),
        audit: entry("login.failed", "user:unknown"),
      });
    await record(["client:a", "key:1"], 0);
    await record(["client:a"], 10);
    const found = await store.findLoginFailures(["client:a", "key:1"], 10);
    assert.deepEqual(found.map((r) => [r.subject, r.failures]).sort(), [["client:a", 2], [
      "key:1",
      1,
    ]]);
    assert.equal((await store.listAudit()).length, 2);
    assert.equal(await store.clearLoginFailures(["key:1"], { now: 10, ...NO_AUDIT }), 1);
    assert.equal(await store.clearLoginFailures(["key:1"], { now: 10, ...NO_AUDIT }), 0);
    // Past its window a row is invisible, counts from 1 again, and other old rows are pruned.
    await record(["client:b"], 20);
    const later = 20 + 1000;
    assert.deepEqual(await store.findLoginFailures(["client:a", "client:b"], later), []);
    assert.equal((await record(["client:a"], later))[0].failures, 1);
    assert.equal(await store.countRows("login_failures"), 1);
    assert.deepEqual((await store.listLoginFailures(later)).map((r) => r.subject), ["client:a"]);
    // A successful login forgets the account's counter with the new token.
    await record(["key:1"], later);
    const { user, key } = await seed(store);
    await store.insertToken({
      tokenHash: hashSecret("t9"),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: T0,
      expiresAt: T0 + HOUR,
      maxLiveTokens: 100,
    }, { ...NO_AUDIT, clearLoginFailures: ["key:1"] });
    assert.deepEqual(await store.findLoginFailures(["key:1"], later), []);
  });

  test("login failures: deleteUser() forgets the counters its prefixes start, and only those", async ({ store }) => {
    const { user } = await seed(store);
    const prefix = "portal-login:d1:";
    // Past U+FFFF too: a bound of the prefix and U+FFFF would keep the last.
    const forgotten = [`${prefix}198.51.100.0/24`, `${prefix}\uFFFF`, `${prefix}\u{1F600}x`];
    const kept = ["portal-login:d1", "portal-login:d1;x", "portal-login:d10:x", "portal-mail:d1:x"];
    for (const subject of [...forgotten, ...kept]) {
      await store.recordLoginFailures([subject], {
        now: T0,
        ...NO_AUDIT,
        next: (): LoginFailures => ({
          subject,
          failures: 1,
          lastFailureAt: T0,
          blockedUntil: 0,
          forgetAt: T0 + HOUR,
        }),
      });
    }
    await store.deleteUser(user.id, {
      now: T0 + 1,
      ...anonymizing(user.id),
      forgetCounters: [prefix],
      ...NO_AUDIT,
    });
    assert.deepEqual(
      (await store.listLoginFailures(T0 + 2)).map((row) => row.subject).sort(),
      [...kept].sort(),
    );
  });
}
