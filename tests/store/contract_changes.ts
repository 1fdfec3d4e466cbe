/**
 * The store contract, part 2: audit, retention, the grant change feed, changes to users and
 * the lifecycle (logins and their failures are in contract_logins.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { deleteEndedTokensUntilNone } from "../../src/auth/janitor.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import type { LoginFailures, TokenBatch } from "../../src/store/store.ts";
import {
  anonymizing,
  type ContractTest,
  ENDED,
  entry,
  grantOf,
  HOUR,
  issue,
  NO_AUDIT,
  seed,
  seedUser,
  T0,
} from "./_contract_fixtures.ts";

/** Registers the audit, retention, change feed, user change and lifecycle tests. */
export function registerChangeTests(test: ContractTest): void {
  registerAuditTests(test);
  registerRetentionTests(test);
  registerFeedTests(test);
  registerUserChangeTests(test);
}

/** The audit log: entries commit with their change, and are never rewritten. */
function registerAuditTests(test: ContractTest): void {
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
}

/** Retention: which ended tokens are deleted, and in which batches. */
function registerRetentionTests(test: ContractTest): void {
  for (const [state, sql, endedAt] of ENDED) {
    test(`retention: a token ended by ${state} is deleted once retention has passed`, async (db) => {
      const { store } = db;
      const { tokenId } = await seed(store);
      await db.execSql(sql);
      assert.ok(tokenId > 0);
      const batch = { size: 10 };
      assert.equal(await store.deleteEndedTokens({ ...batch, cutoff: endedAt - 1 }), 0);
      assert.equal(await store.countRows("tokens"), 1);
      assert.equal(await store.deleteEndedTokens({ ...batch, cutoff: endedAt }), 1);
      assert.equal(await store.countRows("tokens"), 0);
    });
  }

  for (const [state, sql, endedAt] of ENDED) {
    // Keys and users that ended at or before endedSince are skipped: the caller knows their
    // tokens are gone. A token's own expiry and revocation are looked at whatever it says.
    const skipped = state.startsWith("key") || state.startsWith("user");
    test(`retention: a batch with endedSince ${skipped ? "skips" : "still deletes"} a token ended by ${state} at it`, async (db) => {
      const { store } = db;
      await seed(store);
      await db.execSql(sql);
      const batch = { size: 10, cutoff: endedAt };
      assert.equal(
        await store.deleteEndedTokens({ ...batch, endedSince: endedAt }),
        skipped ? 0 : 1,
      );
      assert.equal(await store.countRows("tokens"), skipped ? 1 : 0);
      assert.equal(
        await store.deleteEndedTokens({ ...batch, endedSince: endedAt - 1 }),
        skipped ? 1 : 0,
      );
      assert.equal(await store.countRows("tokens"), 0);
    });
  }

  for (const sql of ["UPDATE api_keys SET disabled_at = 1", "UPDATE users SET disabled = 1"]) {
    test(`retention keeps tokens a re-enable would revive (${sql})`, async (db) => {
      const { store } = db;
      await seed(store);
      await db.execSql(sql);
      const cutoff = T0 + HOUR - 1;
      assert.equal(await store.deleteEndedTokens({ size: 10, cutoff }), 0);
      assert.equal(await deleteEndedTokensUntilNone(store, cutoff), 0);
      assert.equal(await store.countRows("tokens"), 1);
      await db.execSql(sql.replace("= 1", sql.includes("disabled_at") ? "= NULL" : "= 0"));
      assert.ok(await grantOf(store, "t1", "k1", cutoff));
    });
  }

  test("retention: a batch deletes at most its size, rows ended in any way, and only those", async (db) => {
    const { store } = db;
    const { user, key } = await seed(store);
    // A second user with two keys, whose rows end in the other ways; t1 (seed) expires at T0 + 1 h.
    const other = await store.insertUser(
      { email: "c@d.org", passwordHash: "x", tokenTimeoutSeconds: null },
      { now: T0, ...NO_AUDIT },
    );
    const keyOf = async (name: string, userId = other.id) =>
      (await store.insertApiKey(
        { userId, keyHash: hashSecret(name), prefix: name, label: "" },
        { now: T0, ...NO_AUDIT },
      )).id;
    const k2 = await keyOf("k2");
    const k3 = await keyOf("k3");
    const k4 = await keyOf("k4", user.id);
    const live = { issuedAt: T0 + 2, expiresAt: T0 + 5 * HOUR };
    // Ended by 1 h 30: t1 (its expiry), r (revoked), a and b (key k2 revoked), c (user cutoff,
    // issued before it), e (revoked and expired: ended in two ways, one row).
    await issue(store, { userId: user.id, apiKeyId: key.id }, "r", live);
    await issue(store, { userId: user.id, apiKeyId: key.id }, "e", {
      issuedAt: T0,
      expiresAt: T0 + HOUR,
    });
    await issue(store, { userId: other.id, apiKeyId: k2 }, "a", live);
    await issue(store, { userId: other.id, apiKeyId: k2 }, "b", live);
    await issue(store, { userId: other.id, apiKeyId: k3 }, "c", {
      issuedAt: T0,
      expiresAt: T0 + 5 * HOUR,
    });
    // Not ended by 1 h 30: issued after the user's cutoff, revoked later, of a key revoked later.
    await issue(store, { userId: other.id, apiKeyId: k3 }, "after-cutoff", {
      ...live,
      issuedAt: T0 + 20,
    });
    await issue(store, { userId: user.id, apiKeyId: key.id }, "revoked-late", live);
    await issue(store, { userId: user.id, apiKeyId: k4 }, "key-late", live);
    await db.execSql(`UPDATE tokens SET revoked_at = ${T0 + HOUR} WHERE id IN
      (SELECT id FROM tokens WHERE api_key_id = ${key.id} ORDER BY id LIMIT 2 OFFSET 1)`);
    await db.execSql(`UPDATE tokens SET revoked_at = ${T0 + 3 * HOUR} WHERE id =
      (SELECT max(id) FROM tokens WHERE api_key_id = ${key.id})`);
    await db.execSql(`UPDATE api_keys SET revoked_at = ${T0 + HOUR} WHERE id = ${k2}`);
    await db.execSql(`UPDATE api_keys SET revoked_at = ${T0 + 3 * HOUR} WHERE id = ${k4}`);
    await db.execSql(`UPDATE users SET tokens_valid_from = ${T0 + 10}, updated_at = ${T0 + HOUR}
      WHERE id = ${other.id}`);
    const cutoff = T0 + 3 * HOUR / 2;
    assert.equal(await store.countRows("tokens"), 9);
    const counts = [];
    for (let count = -1; count !== 0;) {
      count = await store.deleteEndedTokens({ size: 2, cutoff });
      assert.ok(count <= 2, `a batch of 2 deleted ${count}`);
      counts.push(count);
    }
    assert.equal(counts.reduce((a, b) => a + b), 6, `batches: ${counts}`);
    assert.equal(await store.countRows("tokens"), 3);
    // The live one kept still answers; those revoked later (the token, the key) go once their
    // revocation has.
    assert.ok(await grantOf(store, "after-cutoff", "k3", cutoff));
    assert.equal(await deleteEndedTokensUntilNone(store, T0 + 3 * HOUR), 2);
    assert.equal(await store.countRows("tokens"), 1);
  });

  test("retention: batches until none is left delete every ended row, past a batch's size", async (db) => {
    const { store } = db;
    const { user, key } = await seed(store);
    for (let i = 2; i <= 1100; i++) {
      await issue(store, { userId: user.id, apiKeyId: key.id }, `t${i}`, {
        issuedAt: T0 + i,
        expiresAt: i % 2 === 0 ? T0 + 5 * HOUR : T0 + HOUR / 2,
        maxLiveTokens: 10_000,
      });
    }
    // t1 and the odd ones expired: at T0 + 2 h, 550 of 1,100 rows ended (more than a batch).
    const sizes: number[] = [];
    const counting = {
      deleteEndedTokens: async (batch: TokenBatch) => {
        const count = await store.deleteEndedTokens(batch);
        sizes.push(count);
        return count;
      },
    };
    assert.equal(await deleteEndedTokensUntilNone(counting, T0 + 2 * HOUR), 550);
    assert.deepEqual(sizes, [500, 50, 0], "at most a batch each, until one deletes none");
    assert.equal(await store.countRows("tokens"), 550);
    assert.equal(await store.countLiveTokens(T0 + 2 * HOUR), 550);
    await db.execSql(`UPDATE api_keys SET revoked_at = ${T0 + 2 * HOUR}`);
    assert.equal(await deleteEndedTokensUntilNone(store, T0 + 2 * HOUR), 550);
    assert.equal(await store.countRows("tokens"), 0);
  });
}

/** The grant change feed: what moves the epoch. */
function registerFeedTests(test: ContractTest): void {
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
      [
        "deleteEndedTokens",
        () => store.deleteEndedTokens({ size: 500, cutoff: T0 + 10 * HOUR }),
      ],
      [
        "updateUserEmail (a grant carries the e-mail)",
        () => store.updateUserEmail(user.id, { email: "renamed@b.org", now, ...NO_AUDIT }),
      ],
      [
        "deleteUser",
        () => store.deleteUser(user.id, { now, ...anonymizing(user.id), ...NO_AUDIT }),
      ],
    ];
    for (const [name, write] of ends) {
      const before = store.readGrantEpoch();
      await write();
      assert.notEqual(store.readGrantEpoch(), before, `${name} moves the epoch`);
    }
  });
}

/** Users renamed and deleted, and the store's own lifecycle. */
function registerUserChangeTests(test: ContractTest): void {
  test("users: renamed (refused when taken), deleted with their keys, tokens and counters", async ({ store }) => {
    const { user, key } = await seed(store);
    await issue(store, { userId: user.id, apiKeyId: key.id }, "t2", { issuedAt: T0 + 1 });
    const { user: other, key: otherKey } = await seedUser(store, "c@d.org", "k2");
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
      ...anonymizing(user.id, "user:deleted:gone"),
      audit: (result) => entry("user.deleted", "user:deleted:gone", { ...result }),
    });
    assert.deepEqual(deleted, { apiKeys: 1, tokens: 2, auditRows: 1 });
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
      ["user.deleted", { apiKeys: 1, tokens: 2, auditRows: 1 }],
    ]);
  });

  test("lifecycle: ready while open, closing twice is harmless", async ({ store }) => {
    assert.equal(await store.checkStoreReady(), true);
    await store.closeStore();
    await store.closeStore();
  });
}
