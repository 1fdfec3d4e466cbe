/**
 * Targeted invalidation, on the backend `KEYGATE_TEST_STORE` names: for each scope (token, key,
 * user, all) a change evicts exactly the cached entries it touches, in all three caches, whether
 * this store wrote it or another process did; a value read while a change touching it was
 * learned is not kept, one read while an unrelated change was learned is.
 */
import assert from "node:assert/strict";
import {
  createGrantCache,
  createKeyHolderCache,
  createTokenStatusCache,
} from "../../src/auth/grant_cache.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import type { Store } from "../../src/store/store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import {
  afterExternalWrite,
  openTestStore,
  querySqlAt,
  TEST_STORE_NAME,
  type TestStore,
} from "../_helpers/store.ts";
import { runAdminProcess } from "../_helpers/admin_cli.ts";

const NOW = 10_000;
const NO_AUDIT = { audit: undefined };
const KEYS = { k1: "key-one", k1b: "key-one-b", k2: "key-two" } as const;
const TOKENS = {
  t1a: "a".repeat(40),
  t1b: "b".repeat(40),
  t1c: "c".repeat(40),
  t2: "d".repeat(40),
} as const;
type TokenName = keyof typeof TOKENS;
type KeyName = keyof typeof KEYS;
/** Which key each token was issued with. */
const KEY_OF: Record<TokenName, KeyName> = { t1a: "k1", t1b: "k1", t1c: "k1b", t2: "k2" };

/** Two users: the first with keys k1 (tokens t1a, t1b) and k1b (t1c), the second with k2 (t2). */
async function seedWorld(store: Store) {
  const u1 = await store.insertUser(
    { email: "one@example.org", passwordHash: "x", tokenTimeoutSeconds: null },
    { now: 1000, ...NO_AUDIT },
  );
  const u2 = await store.insertUser(
    { email: "two@example.org", passwordHash: "x", tokenTimeoutSeconds: null },
    { now: 1000, ...NO_AUDIT },
  );
  const keyIds = {} as Record<KeyName, number>;
  for (const [name, userId] of [["k1", u1.id], ["k1b", u1.id], ["k2", u2.id]] as const) {
    const key = await store.insertApiKey(
      { userId, keyHash: hashSecret(KEYS[name]), prefix: name, label: "" },
      { now: 1000, ...NO_AUDIT },
    );
    keyIds[name] = key.id;
  }
  const tokenIds = {} as Record<TokenName, number>;
  for (const name of Object.keys(TOKENS) as TokenName[]) {
    const key = KEY_OF[name];
    tokenIds[name] = await store.insertToken({
      tokenHash: hashSecret(TOKENS[name]),
      userId: key === "k2" ? u2.id : u1.id,
      apiKeyId: keyIds[key],
      issuedAt: 2000,
      expiresAt: 1_000_000,
      maxLiveTokens: 10,
    }, NO_AUDIT);
  }
  return { users: { u1: u1.id, u2: u2.id }, keyIds, tokenIds };
}

/** The three caches over `store`, warmed with every token and key. */
async function warmCaches(store: Store) {
  const grants = createGrantCache(store);
  const holders = createKeyHolderCache(store);
  const statuses = createTokenStatusCache(store);
  for (const name of Object.keys(TOKENS) as TokenName[]) {
    assert.ok(await grants(KEYS[KEY_OF[name]], TOKENS[name], NOW), `${name} is valid`);
    assert.equal((await statuses(TOKENS[name], NOW))?.live, true);
  }
  for (const key of Object.values(KEYS)) assert.ok(await holders(key, NOW));
  return {
    grants,
    holders,
    statuses,
    /** Whether the grant of `name` is answered from memory (synchronously). */
    grantCached: (name: TokenName) => isSync(grants(KEYS[KEY_OF[name]], TOKENS[name], NOW)),
    holderCached: (name: KeyName) => isSync(holders(KEYS[name], NOW)),
    statusCached: (name: TokenName) => isSync(statuses(TOKENS[name], NOW)),
    /** The grant of `name`, from memory or the store. */
    grantOf: (name: TokenName) => Promise.resolve(grants(KEYS[KEY_OF[name]], TOKENS[name], NOW)),
  };
}

/** Whether a lookup was answered synchronously (from memory); waits for one that was not. */
async function isSync(found: unknown): Promise<boolean> {
  if (!(found instanceof Promise)) return true;
  await found;
  return false;
}

/** A second store on the same database: another process (the admin CLI, another instance). */
async function openOther(db: TestStore): Promise<Store> {
  if (TEST_STORE_NAME === "postgres") {
    const { openPostgresStore } = await import("../../src/store/postgres/open_postgres_store.ts");
    return await openPostgresStore(db.path, { applicationName: "keygate-other" });
  }
  return openSqliteStore(db.path);
}

type World = Awaited<ReturnType<typeof seedWorld>>;

/** One scope's change, and what it must and must not evict. */
interface ScopeCase {
  scope: "token" | "key" | "user";
  write(store: Store, world: World): Promise<unknown>;
  ended: TokenName[];
  kept: TokenName[];
  endedKeys: KeyName[];
  keptKeys: KeyName[];
}

const CASES: ScopeCase[] = [
  {
    scope: "token",
    write: (store, { tokenIds }) => store.revokeToken(tokenIds.t1a, { now: NOW, ...NO_AUDIT }),
    ended: ["t1a"],
    kept: ["t1b", "t1c", "t2"],
    endedKeys: [],
    keptKeys: ["k1", "k1b", "k2"],
  },
  {
    scope: "key",
    write: (store, { keyIds }) => store.revokeApiKey(keyIds.k1, { now: NOW, ...NO_AUDIT }),
    ended: ["t1a", "t1b"],
    kept: ["t1c", "t2"],
    endedKeys: ["k1"],
    keptKeys: ["k1b", "k2"],
  },
  {
    scope: "user",
    write: (store, { users }) =>
      store.updateUserDisabled(users.u1, { now: NOW, disabled: true, ...NO_AUDIT }),
    ended: ["t1a", "t1b", "t1c"],
    kept: ["t2"],
    endedKeys: ["k1", "k1b"],
    keptKeys: ["k2"],
  },
];

for (const writer of ["this store", "another process"] as const) {
  for (const c of CASES) {
    Deno.test(`grant caches: a ${c.scope} change by ${writer} evicts exactly its entries (${TEST_STORE_NAME})`, async () => {
      await using db = await openTestStore();
      const world = await seedWorld(db.store);
      const caches = await warmCaches(db.store);
      const before = caches.grants.stats();
      if (writer === "this store") await c.write(db.store, world);
      else {
        const other = await openOther(db);
        try {
          await c.write(other, world);
        } finally {
          await other.closeStore();
        }
        await afterExternalWrite(db.path);
      }
      // Too narrow would serve an ended grant: each is refused on the very next lookup.
      for (const name of c.ended) {
        assert.equal(await caches.grantOf(name), undefined, `${name} refused`);
        assert.notEqual((await caches.statuses(TOKENS[name], NOW))?.live, true, `${name} not live`);
      }
      for (const key of c.endedKeys) {
        assert.equal(await caches.holders(KEYS[key], NOW), undefined, `${key} refused`);
      }
      // Too wide would evict an unrelated entry: each is still answered from memory.
      for (const name of c.kept) {
        assert.ok(await caches.grantCached(name), `grant of ${name} still cached`);
        assert.ok(await caches.statusCached(name), `status of ${name} still cached`);
      }
      for (const key of c.keptKeys) {
        assert.ok(await caches.holderCached(key), `${key} still cached`);
      }
      const after = caches.grants.stats();
      assert.equal(after.invalidated[c.scope] - before.invalidated[c.scope], c.ended.length);
      assert.equal(after.invalidated.all, 0);
      assert.equal(db.store.readGrantInvalidations()[c.scope] >= 1, true);
    });
  }
}

Deno.test(`grant caches: a change nobody can account for empties every cache (${TEST_STORE_NAME})`, async () => {
  await using db = await openTestStore();
  const world = await seedWorld(db.store);
  const caches = await warmCaches(db.store);
  // A hand-made revocation the change record does not see, and what makes the store give up
  // on the record: on PostgreSQL an epoch bumped by hand (a position without rows), on SQLite
  // a schema change (here, the very trigger that would have recorded it dropped).
  if (TEST_STORE_NAME === "postgres") {
    await querySqlAt(db.path, `UPDATE tokens SET revoked_at = 1 WHERE id = ${world.tokenIds.t2}`);
    await querySqlAt(db.path, "UPDATE grant_epoch SET epoch = epoch + 1 WHERE id = 1");
  } else {
    await querySqlAt(db.path, "DROP TRIGGER grant_changes_token_update");
    await querySqlAt(db.path, `UPDATE tokens SET revoked_at = 1 WHERE id = ${world.tokenIds.t2}`);
  }
  await afterExternalWrite(db.path);
  assert.equal(await caches.grantOf("t2"), undefined, "the unrecorded revocation is honoured");
  assert.equal(await caches.grantCached("t1a"), false, "everything was evicted");
  const stats = caches.grants.stats();
  assert.equal(stats.invalidated.all, 4);
  assert.ok(db.store.readGrantInvalidations().all >= 1);
});

Deno.test(`grant caches: a value read while a change touching it committed is not kept; an unrelated change does not matter (${TEST_STORE_NAME})`, async () => {
  await using db = await openTestStore();
  const world = await seedWorld(db.store);
  // A store whose lookup lets a change commit between the read and the cache's decision.
  let during: (() => Promise<unknown>) | undefined;
  const racing: Store = {
    ...db.store,
    async findTokenGrant(lookup) {
      const found = await db.store.findTokenGrant(lookup);
      await during?.();
      during = undefined;
      return found;
    },
  };
  const grants = createGrantCache(racing);
  // Unrelated: another user's token ends while t1a is read. t1a is kept.
  during = () => db.store.revokeToken(world.tokenIds.t2, { now: NOW, ...NO_AUDIT });
  assert.ok(await grants(KEYS.k1, TOKENS.t1a, NOW));
  assert.ok(await isSync(grants(KEYS.k1, TOKENS.t1a, NOW)), "kept");
  // Related: t1b's key is revoked while t1b is read. The (stale) grant is answered this once,
  // as a request that began before the revocation, and never kept.
  during = () => db.store.revokeApiKey(world.keyIds.k1, { now: NOW, ...NO_AUDIT });
  assert.ok(await grants(KEYS.k1, TOKENS.t1b, NOW));
  assert.equal(await grants(KEYS.k1, TOKENS.t1b, NOW), undefined, "not kept: read afresh");
  assert.equal(grants.stats().notKept, 1);
  assert.equal(await grants(KEYS.k1, TOKENS.t1a, NOW), undefined, "the key's other token too");
});

Deno.test({
  name:
    `grant caches: the admin CLI as a child process revokes a key; the cache refuses its tokens on the next lookup and keeps the rest (${TEST_STORE_NAME})`,
  sanitizeResources: false,
  async fn() {
    await using db = await openTestStore();
    const world = await seedWorld(db.store);
    const caches = await warmCaches(db.store);
    const run = await runAdminProcess(db.path, ["key", "revoke", String(world.keyIds.k1)]);
    assert.equal(run.code, 0, run.err);
    await afterExternalWrite(db.path);
    assert.equal(await caches.grantOf("t1a"), undefined);
    assert.equal(await caches.grantOf("t1b"), undefined);
    assert.equal(await caches.holders(KEYS.k1, NOW), undefined);
    assert.ok(await caches.grantCached("t1c"));
    assert.ok(await caches.grantCached("t2"));
    assert.ok(await caches.holderCached("k2"));
  },
});
