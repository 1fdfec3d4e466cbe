/**
 * The store contract, part 1: the rules that decide who gets in (usable
 * key, valid token, cutoff, cap, expiry) and the user and key rows.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreConflict, StoreError } from "../../src/store/errors.ts";
import {
  ALONE,
  type ContractTest,
  entry,
  grantOf,
  HOUR,
  issue,
  NO_AUDIT,
  seed,
  T0,
} from "./_contract_fixtures.ts";

/** Registers the grant-rule tests. */
export function registerGrantTests(test: ContractTest): void {
  registerGrantRuleTests(test);
  registerTokenLifetimeTests(test);
  registerKeyAndLookupTests(test);
}

/** Who gets in: constraints, a token with its own key, the states that end a grant, the cutoff. */
function registerGrantRuleTests(test: ContractTest): void {
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
}

/** A token's life: issued under the cutoff and the cap, revoked with its user, expired. */
function registerTokenLifetimeTests(test: ContractTest): void {
  test("insertToken() with userCutoff refuses a user whose cutoff moved or who was disabled meanwhile", async ({ store }) => {
    const { user, key } = await seed(store);
    const read = (await store.findUserById(user.id))!.tokensValidFrom;
    const token = (name: string) => ({
      tokenHash: hashSecret(name),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: T0 + 10,
      expiresAt: T0 + HOUR,
      maxLiveTokens: 100,
      userCutoff: read,
    });
    // Unchanged: stored.
    assert.ok(await store.insertToken(token("u1"), NO_AUDIT) > 0);
    // A password change committed while the login checked the old password: refused, nothing stored.
    const change = { passwordHash: "$argon2id$new", now: T0 + 5, ...NO_AUDIT };
    await store.updateUserPassword(user.id, change);
    const before = await store.countRows("tokens");
    await assert.rejects(store.insertToken(token("u2"), NO_AUDIT), StoreConflict);
    assert.equal(await store.countRows("tokens"), before);
    // A disabled user, read with the right cutoff: refused too.
    const fresh = (await store.findUserById(user.id))!.tokensValidFrom;
    await store.updateUserDisabled(user.id, { disabled: true, now: T0 + 6, ...NO_AUDIT });
    const now = (await store.findUserById(user.id))!.tokensValidFrom;
    for (const cutoff of [fresh, now]) {
      await assert.rejects(
        store.insertToken({ ...token("u3"), userCutoff: cutoff }, NO_AUDIT),
        StoreConflict,
      );
    }
    assert.equal(await store.countRows("tokens"), before);
  });

  test("revokeTokensOfUser() without before ends tokens issued later than the writer's clock", async ({ store }) => {
    const { user, key } = await seed(store);
    const owner = { userId: user.id, apiKeyId: key.id };
    // A login on a host (or at a moment) whose clock is ahead of the revoking writer's.
    await issue(store, owner, "ahead", { issuedAt: T0 + 5000 });
    assert.ok(await grantOf(store, "ahead", "k1", T0 + 5001));
    assert.equal(await store.revokeTokensOfUser(user.id, { now: T0 + 100, ...NO_AUDIT }), 2);
    assert.equal(await grantOf(store, "ahead", "k1", T0 + 5001), undefined);
    assert.ok((await store.findUserById(user.id))!.tokensValidFrom > T0 + 5000);
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
    // The holder carries its key's expiry (a cache of holders checks it on every hit).
    assert.equal((await store.findKeyHolder(hashSecret("k2"), T0 + 49))?.keyExpiresAt, T0 + 50);
    assert.equal(await store.findKeyHolder(hashSecret("k2"), T0 + 50), undefined);
    await issue(store, { userId: user.id, apiKeyId: expiring.id }, "t2");
    assert.equal((await grantOf(store, "t2", "k2", T0 + 10))!.expiresAt, T0 + 50);
    assert.equal((await grantOf(store, "t2", "k2", T0 + 10))!.keyExpiresAt, T0 + 50);
    assert.equal((await store.findTokenStatus(hashSecret("t2"), T0 + 10))!.expiresAt, T0 + 50);
    assert.equal((await store.findTokenStatus(hashSecret("t2"), T0 + 50))!.live, false);
  });

  test("an expiry beyond a Date's range reads as the latest Date, in every view of the token", async ({ store, execSql }) => {
    const { user, key, tokenId } = await seed(store);
    const MAX = 8_640_000_000_000_000;
    // Beyond a Date (as a timeout from before the duration cap gave), then beyond 2^53 (by hand).
    for (const stored of ["8700000000000000", "9000000000000000000"]) {
      await execSql(`UPDATE tokens SET expires_at = ${stored} WHERE id = ${tokenId}`);
      const grant = await grantOf(store, "t1", "k1", T0);
      assert.equal(grant?.expiresAt, MAX, stored);
      assert.equal(grant?.keyExpiresAt, null);
      assert.equal(new Date(grant!.expiresAt).toISOString(), "+275760-09-13T00:00:00.000Z");
      const status = await store.findTokenStatus(hashSecret("t1"), T0);
      assert.deepEqual([status?.expiresAt, status?.live], [MAX, true]);
      assert.deepEqual((await store.listTokensOfUser(user.id)).map((t) => t.expiresAt), [MAX]);
      const listed = await store.searchTokensOfUser(user.id, { now: T0, limit: 10 });
      assert.deepEqual(listed.map((t) => [t.id, t.expiresAt, t.live]), [[tokenId, MAX, true]]);
      assert.equal(await store.countLiveTokens(T0), 1);
    }
    // A key's expiry past a Date (or 2^53) caps its tokens at the latest Date too.
    for (const stored of ["8700000000000000", "9000000000000000000"]) {
      await execSql(`UPDATE api_keys SET expires_at = ${stored} WHERE id = ${key.id}`);
      assert.equal((await store.findApiKeyById(key.id))?.expiresAt, MAX, stored);
      assert.equal((await store.findApiKeyByHash(hashSecret("k1")))?.expiresAt, MAX);
      assert.equal((await store.listApiKeys(user.id))[0].expiresAt, MAX);
      assert.equal((await store.listApiKeys())[0].expiresAt, MAX);
      const holder = await store.findKeyHolder(hashSecret("k1"), T0);
      assert.deepEqual([holder?.apiKeyId, holder?.keyExpiresAt], [key.id, MAX]);
      const grant = await grantOf(store, "t1", "k1", T0);
      assert.deepEqual([grant?.expiresAt, grant?.keyExpiresAt], [MAX, MAX]);
    }
  });
}

/** Key holders, token statuses, users and keys found and listed, rotation. */
function registerKeyAndLookupTests(test: ContractTest): void {
  test("findKeyHolder() finds a usable key of an enabled user only", async ({ store }) => {
    const { user, key } = await seed(store);
    assert.deepEqual(await store.findKeyHolder(hashSecret("k1"), T0), {
      apiKeyId: key.id,
      userId: user.id,
      email: "a@b.org",
      introspect: false,
      keyExpiresAt: null,
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
    // No user can hold a NUL (PostgreSQL's text cannot): a login naming one finds nobody.
    assert.equal(await store.findUserByEmail("a\u0000@b.org"), undefined);
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
}
