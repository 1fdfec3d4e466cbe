/**
 * The store contract, part 2: audit, retention, login failures, the grant
 * change feed and the lifecycle.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreBlocked, StoreConflict } from "../../src/store/errors.ts";
import type { LoginFailures } from "../../src/store/store.ts";
import {
  type ContractTest,
  ENDED,
  entry,
  grantOf,
  HOUR,
  issue,
  NO_AUDIT,
  seed,
  T0,
} from "./_contract_fixtures.ts";

/** Registers the change, retention and feed tests. */
export function registerChangeTests(test: ContractTest): void {
  test("audit: a change's entries commit with it, computed from its result, or not at all", async ({ store }) => {
    const { user, key } = await seed(store);
    const tokenId = await store.insertToken({
      tokenHash: hashSecret("t2"),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: T0,
      expiresAt: T0 + HOUR,
      maxLiveTokens: 100,
    }, { audit: entry("token.issued", "user:a@b.org", { client: "192.0.2.1" }) });
    // An audit function returning undefined records nothing.
    await store.revokeToken(tokenId + 100, {
      now: T0,
      audit: (revoked) => revoked ? entry("token.revoked", "never") : undefined,
    });
    // A change whose audit cannot be made is not made.
    await assert.rejects(
      store.insertUser({ email: "c@d.org", passwordHash: "x", tokenTimeoutSeconds: null }, {
        now: T0,
        audit: () => {
          throw new Error("boom");
        },
      }),
      /boom/,
    );
    assert.equal(await store.findUserByEmail("c@d.org"), undefined);
    await store.appendAudit(entry("user.added", "user:later", { n: 1 }));
    const rows = await store.listAudit();
    assert.deepEqual(rows.map(({ id: _, ...row }) => row), [
      {
        at: T0,
        actor: "cli:test",
        action: "token.issued",
        subject: "user:a@b.org",
        // The store adds the new token's id to the entry's detail.
        detail: { client: "192.0.2.1", token_id: tokenId },
      },
      { at: T0, actor: "cli:test", action: "user.added", subject: "user:later", detail: { n: 1 } },
    ]);
    assert.ok(rows[0].id < rows[1].id);
    assert.equal((await store.listAudit(T0 + 1)).length, 0);
    assert.equal(await store.countRows("audit_log"), 2);
  });

  test("audit: the log is append-only", async (db) => {
    await db.store.appendAudit(entry("user.added", "user:x"));
    await assert.rejects(db.execSql("UPDATE audit_log SET subject = 'forged'"));
    await assert.rejects(db.execSql("DELETE FROM audit_log"));
    assert.deepEqual((await db.store.listAudit()).map((row) => row.subject), ["user:x"]);
  });

  for (const [state, sql, endedAt] of ENDED) {
    test(`retention: a token ended by ${state} is deleted once retention has passed`, async (db) => {
      const { store } = db;
      const { tokenId } = await seed(store);
      await db.execSql(sql);
      const batch = { afterId: tokenId - 1, size: 10 };
      assert.equal(await store.deleteEndedTokens({ ...batch, cutoff: endedAt - 1 }), 0);
      assert.equal(await store.countRows("tokens"), 1);
      assert.equal(await store.deleteEndedTokens({ ...batch, cutoff: endedAt }), 1);
      assert.equal(await store.countRows("tokens"), 0);
    });
  }

  for (const sql of ["UPDATE api_keys SET disabled_at = 1", "UPDATE users SET disabled = 1"]) {
    test(`retention keeps tokens a re-enable would revive (${sql})`, async (db) => {
      const { store } = db;
      const { tokenId } = await seed(store);
      await db.execSql(sql);
      const cutoff = T0 + HOUR - 1;
      assert.equal(await store.deleteEndedTokens({ afterId: tokenId - 1, size: 10, cutoff }), 0);
      assert.equal(await store.purgeEndedTokens(cutoff, NO_AUDIT), 0);
      assert.equal(await store.countRows("tokens"), 1);
      await db.execSql(sql.replace("= 1", sql.includes("disabled_at") ? "= NULL" : "= 0"));
      assert.ok(await grantOf(store, "t1", "k1", cutoff));
    });
  }

  test("retention: token ids bound the batches, and purgeEndedTokens() deletes every ended row", async (db) => {
    const { store } = db;
    const { user, key, tokenId } = await seed(store);
    assert.deepEqual(await store.findTokenIdRange(), { first: tokenId, last: tokenId });
    for (let i = 2; i <= 7; i++) {
      await issue(store, { userId: user.id, apiKeyId: key.id }, `t${i}`, {
        issuedAt: T0 + i,
        expiresAt: i % 2 === 0 ? T0 + 5 * HOUR : T0 + HOUR / 2,
      });
    }
    const range = (await store.findTokenIdRange())!;
    assert.equal(range.last - range.first, 6);
    // t1 and the odd ones expired: at T0 + 2 h, 4 of 7 rows ended.
    const deleted = await store.purgeEndedTokens(T0 + 2 * HOUR, {
      audit: (n) => entry("tokens.purged", "tokens", { deleted: n }),
    });
    assert.equal(deleted, 4);
    assert.equal(await store.countRows("tokens"), 3);
    assert.equal(await store.countLiveTokens(T0 + 2 * HOUR), 3);
    assert.deepEqual((await store.listAudit()).map((row) => row.detail), [{ deleted: 4 }]);
    await db.execSql(`UPDATE api_keys SET revoked_at = ${T0 + 2 * HOUR}`);
    assert.equal(await store.purgeEndedTokens(T0 + 2 * HOUR, NO_AUDIT), 3);
    assert.equal(await store.findTokenIdRange(), undefined);
  });

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

  test("grant change feed: every change that may end a grant moves the epoch, others do not", async ({ store }) => {
    const { user, key, tokenId } = await seed(store);
    const subject = "key:1";
    const keeps: [string, () => Promise<unknown>][] = [
      [
        "insertUser",
        () =>
          store.insertUser({ email: "c@d.org", passwordHash: "x", tokenTimeoutSeconds: null }, {
            now: T0,
            ...NO_AUDIT,
          }),
      ],
      ["insertToken under the cap", () => issue(store, { userId: user.id, apiKeyId: key.id }, "f")],
      [
        "recordKeyUsage",
        () =>
          store.recordKeyUsage([{
            apiKeyId: key.id,
            lastUsedAt: T0,
            lastUsedFrom: "::1",
            count: 1,
          }]),
      ],
      ["appendAudit", () => store.appendAudit(entry("user.added", "x"))],
      ["recordLoginFailures", () =>
        store.recordLoginFailures([subject], {
          now: T0,
          next: () => ({
            subject,
            failures: 1,
            lastFailureAt: T0,
            blockedUntil: 0,
            forgetAt: T0 + 9,
          }),
          ...NO_AUDIT,
        })],
      ["clearLoginFailures", () => store.clearLoginFailures([subject], { now: T0, ...NO_AUDIT })],
    ];
    for (const [name, write] of keeps) {
      const before = store.readGrantEpoch();
      assert.notEqual(before, undefined, "a local store confirms freshness");
      await write();
      assert.equal(store.readGrantEpoch(), before, `${name} keeps grants`);
    }
    const now = T0 + 2000;
    const ends: [string, () => Promise<unknown>][] = [
      [
        "updateUserTimeout",
        () => store.updateUserTimeout(user.id, { tokenTimeoutSeconds: 60, now, ...NO_AUDIT }),
      ],
      [
        "updateApiKeyDisabled",
        () => store.updateApiKeyDisabled(key.id, { disabled: true, now, ...NO_AUDIT }),
      ],
      [
        "updateUserDisabled",
        () => store.updateUserDisabled(user.id, { disabled: true, now, ...NO_AUDIT }),
      ],
      [
        "updateUserPassword",
        () => store.updateUserPassword(user.id, { passwordHash: "y", now, ...NO_AUDIT }),
      ],
      ["revokeToken", () => store.revokeToken(tokenId, { now, ...NO_AUDIT })],
      [
        "revokeTokenOfKey",
        () => store.revokeTokenOfKey(hashSecret("f"), { apiKeyId: key.id, now, ...NO_AUDIT }),
      ],
      [
        "revokeTokensOfUser before",
        () => store.revokeTokensOfUser(user.id, { before: now + 500, now: now + 500, ...NO_AUDIT }),
      ],
      ["rotateApiKey", () =>
        store.rotateApiKey(key.id, {
          successor: { userId: user.id, keyHash: hashSecret("k9"), prefix: "k9", label: "" },
          oldKeyExpiresAt: now + 3000,
          now: now + 1000,
          ...NO_AUDIT,
        })],
      [
        "revokeTokensOfUser",
        () => store.revokeTokensOfUser(user.id, { now: now + 2000, ...NO_AUDIT }),
      ],
      ["revokeApiKey", () => store.revokeApiKey(key.id, { now: now + 2000, ...NO_AUDIT })],
      // An expired token's 401 changes from token_expired to invalid_token once its row is gone.
      ["purgeEndedTokens", () => store.purgeEndedTokens(T0 + 10 * HOUR, NO_AUDIT)],
      [
        "updateUserEmail (a grant carries the e-mail)",
        () => store.updateUserEmail(user.id, { email: "renamed@b.org", now, ...NO_AUDIT }),
      ],
      ["deleteUser", () => store.deleteUser(user.id, { now, ...NO_AUDIT })],
    ];
    for (const [name, write] of ends) {
      const before = store.readGrantEpoch();
      await write();
      assert.notEqual(store.readGrantEpoch(), before, `${name} moves the epoch`);
    }
  });

  test("users: renamed (refused when taken), deleted with their keys, tokens and counters", async ({ store }) => {
    const { user, key } = await seed(store);
    await issue(store, { userId: user.id, apiKeyId: key.id }, "t2", { issuedAt: T0 + 1 });
    const other = await store.insertUser(
      { email: "c@d.org", passwordHash: "x", tokenTimeoutSeconds: null },
      { now: T0, ...NO_AUDIT },
    );
    const otherKey = await store.insertApiKey(
      { userId: other.id, keyHash: hashSecret("k2"), prefix: "k2", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    await issue(store, { userId: other.id, apiKeyId: otherKey.id }, "o1");

    await assert.rejects(
      store.updateUserEmail(user.id, { email: "c@d.org", now: T0 + 1, ...NO_AUDIT }),
      StoreConflict,
    );
    await store.updateUserEmail(user.id, {
      email: "new@b.org",
      now: T0 + 2,
      audit: entry("user.renamed", "user:new@b.org"),
    });
    assert.equal((await store.findUserById(user.id))!.email, "new@b.org");
    assert.equal(await store.findUserByEmail("a@b.org"), undefined);
    assert.equal(
      (await grantOf(store, "t1", "k1", T0 + 3))?.email,
      "new@b.org",
      "a rename ends no grant, and the grant shows the new e-mail",
    );

    const tokens = await store.listTokensOfUser(user.id);
    assert.deepEqual(tokens.map((t) => [t.apiKeyId, t.issuedAt, t.revokedAt]), [
      [key.id, T0 + 1, null],
      [key.id, T0, null],
    ]);

    await store.recordLoginFailures([`key:${key.id}`, `key:${otherKey.id}`], {
      now: T0,
      ...NO_AUDIT,
      next: (_previous, subject): LoginFailures => ({
        subject,
        failures: 1,
        lastFailureAt: T0,
        blockedUntil: 0,
        forgetAt: T0 + HOUR,
      }),
    });
    const deleted = await store.deleteUser(user.id, {
      now: T0 + 4,
      audit: (result) => entry("user.deleted", "user:new@b.org", { ...result }),
    });
    assert.deepEqual(deleted, { apiKeys: 1, tokens: 2 });
    assert.equal(await store.findUserById(user.id), undefined);
    assert.equal(await store.findApiKeyById(key.id), undefined);
    assert.deepEqual(await store.listTokensOfUser(user.id), []);
    assert.equal(await grantOf(store, "t1", "k1", T0 + 5), undefined);
    assert.deepEqual(
      (await store.listLoginFailures(T0 + 5)).map((row) => row.subject),
      [`key:${otherKey.id}`],
    );
    assert.ok(await grantOf(store, "o1", "k2", T0 + 5), "the other user keeps everything");
    assert.deepEqual((await store.listAudit()).map((row) => [row.action, row.detail]), [
      ["user.renamed", {}],
      ["user.deleted", { apiKeys: 1, tokens: 2 }],
    ]);
  });

  test("lifecycle: ready while open, closing twice is harmless", async ({ store }) => {
    assert.equal(await store.checkStoreReady(), true);
    await store.closeStore();
    await store.closeStore();
  });
}
