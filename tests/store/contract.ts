/**
 * The store contract's conformance suite, in the shape Hono uses for its
 * routers: one set of tests, run by every backend with
 * `runStoreContract({ name, open, skip })` (see sqlite_test.ts). It uses
 * only the `Store` interface, plus `execSql` to set one state alone with
 * plain SQL, so that no store method's side effect (a revoked key revoking
 * its tokens, a disabled user's cutoff) can hide a statement that forgot a
 * condition. It pins every rule that lives in SQL: the usable key, the valid
 * token, the revoke-before cutoff, the live-token cap, expiry, the audit
 * log, retention, and the grant change feed.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreConflict, StoreError } from "../../src/store/errors.ts";
import type { AuditEntry, LoginFailures, Store } from "../../src/store/store.ts";

/** A fresh, empty store of the backend under test. */
export interface ContractStore {
  store: Store;
  /** Runs one SQL statement on the same database, as an operator's client would. */
  execSql(sql: string): Promise<void>;
  close(): Promise<void>;
}

/** What a backend gives {@link runStoreContract}. */
export interface StoreContractOptions {
  /** The backend's name, in every test's name. */
  name: string;
  open(): Promise<ContractStore>;
  /** Tests this backend does not run, by name (without the prefix), each with its reason. */
  skip?: Record<string, string>;
}

const T0 = 1_000_000;
const HOUR = 3_600_000;
const NO_AUDIT = { audit: undefined };

/** One user `a@b.org`, its key `k1`, and token `t1` issued at T0 that expires at T0 + 1 h. */
async function seed(store: Store) {
  const user = await store.insertUser(
    { email: "a@b.org", passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    { now: T0, ...NO_AUDIT },
  );
  const key = await store.insertApiKey(
    { userId: user.id, keyHash: hashSecret("k1"), prefix: "k1", label: "" },
    { now: T0, ...NO_AUDIT },
  );
  const tokenId = await issue(store, { userId: user.id, apiKeyId: key.id }, "t1");
  return { user, key, tokenId };
}

function issue(
  store: Store,
  owner: { userId: number; apiKeyId: number },
  token: string,
  times: { issuedAt?: number; expiresAt?: number; maxLiveTokens?: number } = {},
): Promise<number> {
  return store.insertToken({
    tokenHash: hashSecret(token),
    ...owner,
    issuedAt: times.issuedAt ?? T0,
    expiresAt: times.expiresAt ?? T0 + HOUR,
    maxLiveTokens: times.maxLiveTokens ?? 100,
  }, NO_AUDIT);
}

function grantOf(store: Store, token: string, key: string, now: number) {
  return store.findTokenGrant({ tokenHash: hashSecret(token), keyHash: hashSecret(key), now });
}

function entry(action: string, subject: string, detail = {}): AuditEntry {
  return { at: T0, actor: "cli:test", action, subject, detail };
}

/** Each state alone: grant refused, status not live, not counted live, key holder refused? */
const ALONE: [string, string, { keyRefused: boolean }][] = [
  ["key revoked", `UPDATE api_keys SET revoked_at = ${T0 + 10}`, { keyRefused: true }],
  ["key disabled", `UPDATE api_keys SET disabled_at = ${T0 + 10}`, { keyRefused: true }],
  ["key expired", `UPDATE api_keys SET expires_at = ${T0 + 10}`, { keyRefused: true }],
  ["user disabled", "UPDATE users SET disabled = 1", { keyRefused: true }],
  ["user cutoff", `UPDATE users SET tokens_valid_from = ${T0 + 1}`, { keyRefused: false }],
  ["token revoked", `UPDATE tokens SET revoked_at = ${T0 + 10}`, { keyRefused: false }],
];

/** How each state ends a token for retention: the instant retention counts from. */
const ENDED: [string, string, number][] = [
  ["key revoked", `UPDATE api_keys SET revoked_at = ${T0 + 10}`, T0 + 10],
  ["key expired", `UPDATE api_keys SET expires_at = ${T0 + 10}`, T0 + 10],
  [
    "user cutoff",
    `UPDATE users SET tokens_valid_from = ${T0 + 1}, updated_at = ${T0 + 10}`,
    T0 + 10,
  ],
  ["token revoked", `UPDATE tokens SET revoked_at = ${T0 + 10}`, T0 + 10],
  ["token expiry", "UPDATE users SET disabled = 0", T0 + HOUR],
];

/** Registers the contract's tests for one backend. */
export function runStoreContract(options: StoreContractOptions): void {
  const skip = options.skip ?? {};
  for (const [name, reason] of Object.entries(skip)) {
    if (reason.trim() === "") throw new Error(`Skipping "${name}" needs a reason`);
  }
  function test(name: string, fn: (db: ContractStore) => Promise<void>): void {
    Deno.test({
      name: `[store contract: ${options.name}] ${name}`,
      ignore: name in skip,
      async fn() {
        const db = await options.open();
        try {
          await fn(db);
        } finally {
          await db.close();
        }
      },
    });
  }

  test("constraints: a token needs its user and key, an e-mail is lower case", async ({ store }) => {
    await seed(store);
    await assert.rejects(issue(store, { userId: 99, apiKeyId: 99 }, "t9"), StoreError);
    await assert.rejects(
      store.insertUser(
        { email: "Upper@b.org", passwordHash: "x", tokenTimeoutSeconds: null },
        { now: 1, ...NO_AUDIT },
      ),
      StoreError,
    );
    await assert.rejects(
      store.insertUser(
        { email: "a@b.org", passwordHash: "x", tokenTimeoutSeconds: null },
        { now: 1, ...NO_AUDIT },
      ),
      StoreConflict,
    );
    assert.equal(await store.countRows("tokens"), 1);
    assert.equal(await store.countRows("users"), 1);
  });

  test("findTokenGrant() finds a valid token only with its own key", async ({ store }) => {
    const { user, key } = await seed(store);
    const grant = await grantOf(store, "t1", "k1", T0 + 500);
    assert.deepEqual({ ...grant, tokenId: 0 }, {
      tokenId: 0,
      userId: user.id,
      email: "a@b.org",
      apiKeyId: key.id,
      issuedAt: T0,
      expiresAt: T0 + HOUR,
      keyExpiresAt: null,
    });
    assert.equal(await grantOf(store, "t1", "k2", T0 + 500), undefined);
    assert.equal(await grantOf(store, "t2", "k1", T0 + 500), undefined);
    // Expiry is the caller's check: the grant says when, and is still found after.
    assert.equal((await grantOf(store, "t1", "k1", T0 + 2 * HOUR))?.expiresAt, T0 + HOUR);
  });

  for (const [state, sql, { keyRefused }] of ALONE) {
    test(`${state} alone ends the token for the grant, status, live count and key holder`, async (db) => {
      const { store } = db;
      const { tokenId } = await seed(store);
      const now = T0 + 20;
      assert.ok(await grantOf(store, "t1", "k1", now));
      assert.equal((await store.findTokenStatus(hashSecret("t1"), now))!.live, true);
      assert.equal(await store.countLiveTokens(now), 1);
      await db.execSql(sql);
      assert.equal(await grantOf(store, "t1", "k1", now), undefined);
      const status = (await store.findTokenStatus(hashSecret("t1"), now))!;
      assert.equal(status.tokenId, tokenId);
      assert.equal(status.live, false);
      assert.equal(await store.countLiveTokens(now), 0);
      assert.equal((await store.findKeyHolder(hashSecret("k1"), now)) === undefined, keyRefused);
    });
  }

  test("changes end grants: revoked token, disabled user, cutoff, revoked key", async ({ store }) => {
    const { user, key } = await seed(store);
    await issue(store, { userId: user.id, apiKeyId: key.id }, "t2");
    const t1 = (await grantOf(store, "t1", "k1", T0 + 500))!;
    assert.equal(await store.revokeToken(t1.tokenId, { now: T0 + 600, ...NO_AUDIT }), true);
    assert.equal(await store.revokeToken(t1.tokenId, { now: T0 + 700, ...NO_AUDIT }), false);
    assert.equal(await grantOf(store, "t1", "k1", T0 + 800), undefined);
    assert.ok(await grantOf(store, "t2", "k1", T0 + 800));

    const disable = { disabled: true, now: T0 + 1000, ...NO_AUDIT };
    assert.equal(await store.updateUserDisabled(user.id, disable), 1);
    assert.equal(await grantOf(store, "t2", "k1", T0 + 1100), undefined);
    const enable = { disabled: false, now: T0 + 1000, ...NO_AUDIT };
    assert.equal(await store.updateUserDisabled(user.id, enable), 0);
    // Re-enabling revives nothing: the disable moved the cutoff past t2.
    assert.equal(await grantOf(store, "t2", "k1", T0 + 1100), undefined);
    await issue(store, { userId: user.id, apiKeyId: key.id }, "t3", { issuedAt: T0 + 1500 });
    assert.ok(await grantOf(store, "t3", "k1", T0 + 1600));
    assert.equal(await store.revokeApiKey(key.id, { now: T0 + 2000, ...NO_AUDIT }), 1);
    assert.equal(await grantOf(store, "t3", "k1", T0 + 2100), undefined);
  });

  test("the revoke-before cutoff only moves forward, and spares tokens issued at it", async ({ store }) => {
    const { user, key } = await seed(store);
    const owner = { userId: user.id, apiKeyId: key.id };
    await issue(store, owner, "t2", { issuedAt: T0 + 100 });
    await issue(store, owner, "t3", { issuedAt: T0 + 200 });
    const before = T0 + 100;
    const ended = await store.revokeTokensOfUser(user.id, { before, now: T0 + 300, ...NO_AUDIT });
    assert.equal(ended, 1); // t1 only: t2 was issued at the cutoff
    assert.equal(await grantOf(store, "t1", "k1", T0 + 300), undefined);
    assert.ok(await grantOf(store, "t2", "k1", T0 + 300));
    // An earlier cutoff never revives a token.
    await store.revokeTokensOfUser(user.id, { before: T0, now: T0 + 400, ...NO_AUDIT });
    assert.equal((await store.findUserById(user.id))!.tokensValidFrom, T0 + 100);
    assert.equal(await grantOf(store, "t1", "k1", T0 + 400), undefined);
    // Without `before`: everything issued up to and including now.
    assert.equal(await store.revokeTokensOfUser(user.id, { now: T0 + 200, ...NO_AUDIT }), 2);
    assert.ok((await store.findUserById(user.id))!.tokensValidFrom > T0 + 200);
    assert.equal(await grantOf(store, "t3", "k1", T0 + 500), undefined);
    // A password change ends them the same way.
    await issue(store, owner, "t4", { issuedAt: T0 + 1000 });
    const change = { passwordHash: "$argon2id$y", now: T0 + 1000, ...NO_AUDIT };
    assert.equal(await store.updateUserPassword(user.id, change), 1);
    assert.equal((await store.findUserById(user.id))!.passwordHash, "$argon2id$y");
    assert.equal(await grantOf(store, "t4", "k1", T0 + 1100), undefined);
  });

  test("insertToken() keeps at most maxLiveTokens per user and key, revoking the oldest", async ({ store }) => {
    const { user, key } = await seed(store);
    const owner = { userId: user.id, apiKeyId: key.id };
    await store.revokeToken((await grantOf(store, "t1", "k1", T0))!.tokenId, {
      now: T0,
      ...NO_AUDIT,
    });
    for (let i = 0; i < 5; i++) {
      await issue(store, owner, `c${i}`, { issuedAt: T0 + i, maxLiveTokens: 3 });
    }
    const live = [];
    for (let i = 0; i < 5; i++) {
      if (await grantOf(store, `c${i}`, "k1", T0 + 500)) live.push(i);
    }
    assert.deepEqual(live, [2, 3, 4]);
  });

  test("expiry: a token counts live until its expiry, a key's expiry caps its tokens", async ({ store }) => {
    const { user } = await seed(store);
    assert.equal(await store.countLiveTokens(T0 + HOUR - 1), 1);
    assert.equal(await store.countLiveTokens(T0 + HOUR), 0);
    const expiring = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k2"), prefix: "k2", label: "", expiresAt: T0 + 50 },
      { now: T0, ...NO_AUDIT },
    );
    assert.ok(await store.findKeyHolder(hashSecret("k2"), T0 + 49));
    assert.equal(await store.findKeyHolder(hashSecret("k2"), T0 + 50), undefined);
    await issue(store, { userId: user.id, apiKeyId: expiring.id }, "t2");
    assert.equal((await grantOf(store, "t2", "k2", T0 + 10))!.expiresAt, T0 + 50);
    assert.equal((await grantOf(store, "t2", "k2", T0 + 10))!.keyExpiresAt, T0 + 50);
    assert.equal((await store.findTokenStatus(hashSecret("t2"), T0 + 10))!.expiresAt, T0 + 50);
    assert.equal((await store.findTokenStatus(hashSecret("t2"), T0 + 50))!.live, false);
  });

  test("findKeyHolder() finds a usable key of an enabled user only", async ({ store }) => {
    const { user, key } = await seed(store);
    assert.deepEqual(await store.findKeyHolder(hashSecret("k1"), T0), {
      apiKeyId: key.id,
      userId: user.id,
      email: "a@b.org",
      introspect: false,
    });
    assert.equal(await store.findKeyHolder(hashSecret("nope"), T0), undefined);
    const off = { disabled: true, now: T0, ...NO_AUDIT };
    assert.equal(await store.updateApiKeyDisabled(key.id, off), true);
    assert.equal(await store.findKeyHolder(hashSecret("k1"), T0), undefined);
    assert.equal((await store.findTokenStatus(hashSecret("t1"), T0))!.live, false);
    const on = { disabled: false, now: T0, ...NO_AUDIT };
    assert.equal(await store.updateApiKeyDisabled(key.id, on), true);
    assert.equal((await store.findTokenStatus(hashSecret("t1"), T0))!.live, true);
    await store.revokeApiKey(key.id, { now: T0 + 1, ...NO_AUDIT });
    assert.equal(await store.findKeyHolder(hashSecret("k1"), T0 + 2), undefined);
    assert.equal(await store.updateApiKeyDisabled(key.id, off), false); // revoked stays revoked
  });

  test("findTokenStatus() and revokeTokenOfKey() see tokens in every state", async ({ store }) => {
    const { user, key, tokenId } = await seed(store);
    const other = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k2"), prefix: "k2", label: "", introspect: true },
      { now: T0, ...NO_AUDIT },
    );
    assert.equal(other.introspect, true);
    assert.equal(key.introspect, false);
    assert.deepEqual(await store.findTokenStatus(hashSecret("t1"), T0 + 10), {
      tokenId,
      userId: user.id,
      email: "a@b.org",
      apiKeyId: key.id,
      issuedAt: T0,
      expiresAt: T0 + HOUR,
      live: true,
    });
    assert.equal(await store.findTokenStatus(hashSecret("t2"), T0), undefined);
    const by = (apiKeyId: number) => ({ apiKeyId, now: T0 + 20, ...NO_AUDIT });
    // Only the key it was issued with can revoke it, and only once.
    assert.equal(await store.revokeTokenOfKey(hashSecret("t1"), by(other.id)), undefined);
    assert.equal((await store.findTokenStatus(hashSecret("t1"), T0 + 30))!.live, true);
    assert.equal(await store.revokeTokenOfKey(hashSecret("t1"), by(key.id)), tokenId);
    assert.equal(await store.revokeTokenOfKey(hashSecret("t1"), by(key.id)), undefined);
    assert.equal((await store.findTokenStatus(hashSecret("t1"), T0 + 30))!.live, false);
  });

  test("users and keys: found by id, e-mail, digest; listed in order", async ({ store }) => {
    const { user, key } = await seed(store);
    assert.deepEqual(await store.findUserById(user.id), user);
    assert.deepEqual(await store.findUserByEmail("a@b.org"), user);
    assert.equal(await store.findUserById(user.id + 1), undefined);
    assert.deepEqual(await store.findApiKeyById(key.id), key);
    assert.deepEqual(await store.findApiKeyByHash(hashSecret("k1")), key);
    const b = await store.insertUser(
      { email: "0@b.org", passwordHash: "x", tokenTimeoutSeconds: 60 },
      { now: T0, ...NO_AUDIT },
    );
    assert.deepEqual((await store.listUsers()).map((u) => u.email), ["0@b.org", "a@b.org"]);
    await store.updateUserTimeout(b.id, { tokenTimeoutSeconds: null, now: T0 + 5, ...NO_AUDIT });
    assert.equal((await store.findUserById(b.id))!.tokenTimeoutSeconds, null);
    const listed = await store.listApiKeys();
    assert.deepEqual(listed.map((k) => [k.id, k.email, k.userDisabled]), [
      [key.id, "a@b.org", false],
    ]);
    assert.deepEqual(await store.listApiKeys(b.id), []);
    await store.recordKeyUsage([
      { apiKeyId: key.id, lastUsedAt: T0 + 9, lastUsedFrom: "::1", count: 3 },
    ]);
    await store.recordKeyUsage([
      { apiKeyId: key.id, lastUsedAt: T0 + 5, lastUsedFrom: "10.0.0.1", count: 2 },
    ]);
    const used = (await store.findApiKeyById(key.id))!;
    assert.deepEqual([used.useCount, used.lastUsedAt, used.lastUsedFrom], [5, T0 + 9, "::1"]);
  });

  test("rotateApiKey() refuses a key rotated meanwhile and writes nothing", async ({ store }) => {
    const { user, key } = await seed(store);
    const successor = (name: string) => ({
      userId: user.id,
      keyHash: hashSecret(name),
      prefix: name,
      label: "",
      expiresAt: null,
    });
    const second = await store.rotateApiKey(key.id, {
      successor: successor("k2"),
      oldKeyExpiresAt: T0 + 5000,
      now: T0 + 2000,
      audit: (made) => entry("key.rotated", `api_key:${key.id}`, { successor: made.id }),
    });
    const old = (await store.findApiKeyById(key.id))!;
    assert.deepEqual([old.replacedBy, old.expiresAt], [second.id, T0 + 5000]);
    await assert.rejects(
      store.rotateApiKey(key.id, {
        successor: successor("k3"),
        oldKeyExpiresAt: T0 + 9000,
        now: T0 + 2000,
        audit: entry("key.rotated", "again"),
      }),
      StoreConflict,
    );
    assert.equal(await store.findApiKeyByHash(hashSecret("k3")), undefined);
    assert.equal((await store.findApiKeyById(key.id))!.expiresAt, T0 + 5000);
    assert.equal(await store.countRows("api_keys"), 2);
    assert.deepEqual((await store.listAudit()).map((row) => row.subject), [`api_key:${key.id}`]);
  });

  test("audit: a change's entries commit with it, computed from its result, or not at all", async ({ store }) => {
    const { user, key } = await seed(store);
    const tokenId = await store.insertToken({
      tokenHash: hashSecret("t2"),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: T0,
      expiresAt: T0 + HOUR,
      maxLiveTokens: 100,
    }, { audit: (id) => entry("token.issued", "user:a@b.org", { token_id: id }) });
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
        detail: { token_id: tokenId },
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
    ];
    for (const [name, write] of ends) {
      const before = store.readGrantEpoch();
      await write();
      assert.notEqual(store.readGrantEpoch(), before, `${name} moves the epoch`);
    }
  });

  test("lifecycle: ready while open, closing twice is harmless", async ({ store }) => {
    assert.equal(await store.checkStoreReady(), true);
    await store.closeStore();
    await store.closeStore();
  });
}
