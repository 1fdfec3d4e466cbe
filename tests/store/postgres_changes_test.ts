/**
 * The grant change record across PostgreSQL instances: a lost notification is recovered exactly
 * by the poll, a spoofed or malformed one never delays a refusal nor moves what an instance has
 * seen, and what cannot be accounted for (a restored backup, an instance partitioned longer
 * than the record keeps) empties the caches.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { createGrantCache, type GrantFinder } from "../../src/auth/grant_cache.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import {
  openPostgresStore,
  type PostgresStoreOptions,
} from "../../src/store/postgres/open_postgres_store.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { waitFor } from "../_helpers/wait_for.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;
const NOW = Date.parse("2026-01-01T00:00:00Z");
const KEY = "key-of-ada";
const TOKENS = ["a".repeat(40), "b".repeat(40), "c".repeat(40)];
const NO_AUDIT = { audit: undefined };

/** Instances A (writes) and B (caches) on one new database, a user, a key and three tokens. */
async function twoInstances(options: { a?: PostgresStoreOptions; b?: PostgresStoreOptions } = {}) {
  const url = await cluster!.createDatabase("changes");
  const a = await openPostgresStore(url, { applicationName: "keygate-a", ...options.a });
  const b = await openPostgresStore(url, { applicationName: "keygate-b", ...options.b });
  const raw = postgres(url, { max: 1, onnotice: () => {} });
  const user = await a.insertUser(
    { email: "ada@example.com", passwordHash: "x", tokenTimeoutSeconds: null },
    { now: NOW, ...NO_AUDIT },
  );
  const other = await a.insertUser(
    { email: "bob@example.com", passwordHash: "x", tokenTimeoutSeconds: null },
    { now: NOW, ...NO_AUDIT },
  );
  const key = await a.insertApiKey(
    { userId: user.id, keyHash: hashSecret(KEY), prefix: "kg", label: "" },
    { now: NOW, ...NO_AUDIT },
  );
  const tokenIds: number[] = [];
  for (const token of TOKENS) {
    tokenIds.push(
      await a.insertToken({
        tokenHash: hashSecret(token),
        userId: user.id,
        apiKeyId: key.id,
        issuedAt: NOW,
        expiresAt: NOW + 3_600_000,
        maxLiveTokens: 10,
      }, NO_AUDIT),
    );
  }
  await b.refreshGrantEpoch();
  const cache = createGrantCache(b);
  for (const token of TOKENS) assert.ok(await cache(KEY, token, NOW + 1000));
  return {
    a,
    b,
    raw,
    cache,
    tokenIds,
    otherUserId: other.id,
    async [Symbol.asyncDispose]() {
      await raw.end({ timeout: 0 });
      await Promise.all([a.closeStore(), b.closeStore()]);
    },
  };
}

/** Whether `cache` answers token `i` from memory; waits for a lookup that was not. */
async function cached(cache: GrantFinder, i: number): Promise<boolean> {
  const found = cache(KEY, TOKENS[i], NOW + 1000);
  if (!(found instanceof Promise)) return true;
  await found;
  return false;
}

/** Looks token `i` up until it is refused; resolves to how long that took and how many were served. */
async function untilRefused(cache: GrantFinder, i: number, withinMs: number) {
  const start = performance.now();
  let served = 0;
  while (await cache(KEY, TOKENS[i], NOW + 1000) !== undefined) {
    served++;
    if (performance.now() - start > withinMs) {
      throw new Error(`Still served after ${withinMs} ms (${served} times)`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return { ms: performance.now() - start, served };
}

Deno.test({
  name:
    "[pg changes] listener killed mid-stream: the poll recovers the lost revocation exactly, without emptying the cache",
  ignore,
  async fn() {
    await using db = await twoInstances({ b: { pollMs: 100 } });
    await waitFor("listening", () => db.b.readGrantEpochStats().listening, 5000);
    const killed = await db.raw`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
      WHERE application_name = 'keygate-b-listener' AND datname = current_database()`;
    assert.equal(killed.length, 1);
    await waitFor("lost", () => !db.b.readGrantEpochStats().listening, 2000);
    const notified = db.b.readGrantEpochStats().notifications;
    await db.a.revokeToken(db.tokenIds[0], { now: NOW + 2000, ...NO_AUDIT });
    const { ms } = await untilRefused(db.cache, 0, 1000);
    assert.ok(ms <= 1000, `took ${ms} ms`);
    assert.equal(db.b.readGrantEpochStats().notifications, notified, "no notification came");
    // Exactly the revoked token: the other two are still answered from memory.
    assert.ok(await cached(db.cache, 1));
    assert.ok(await cached(db.cache, 2));
    assert.equal(db.cache.stats().invalidated.all, 0);
    assert.equal(db.b.readGrantInvalidations().all, 0);
  },
});

Deno.test({
  name:
    "[pg changes] a spoofed notification moves nothing and never delays a refusal: 0 requests answered after the revocation",
  ignore,
  async fn() {
    await using db = await twoInstances();
    await waitFor("listening", () => db.b.readGrantEpochStats().listening, 5000);
    const seen = db.b.readGrantEpochStats().epoch;
    const position = db.b.readGrantEpoch();
    // Any role with CONNECT can send this.
    await db.raw`NOTIFY keygate_grants, '9007199254740991'`;
    await waitFor("delivered", () => db.b.readGrantEpochStats().notifications >= 1, 2000);
    await db.b.refreshGrantEpoch();
    assert.equal(db.b.readGrantEpochStats().epoch, seen, "the position seen did not move");
    assert.equal(db.b.readGrantEpoch(), position, "nothing was learned");
    assert.ok(await cached(db.cache, 0));
    // A revocation through the same instance: refused on its very next lookup.
    await db.b.revokeToken(db.tokenIds[0], { now: NOW + 2000, ...NO_AUDIT });
    assert.equal(await db.cache(KEY, TOKENS[0], NOW + 1000), undefined);
    // A revocation through the other instance: refused as soon as notified (milliseconds).
    await db.a.revokeToken(db.tokenIds[1], { now: NOW + 2000, ...NO_AUDIT });
    const { ms } = await untilRefused(db.cache, 1, 1000);
    assert.ok(ms < 400, `took ${ms} ms, not within a notification's delay`);
    assert.ok(await cached(db.cache, 2));
  },
});

Deno.test({
  name: "[pg changes] malformed and flooding notifications cost polls, never a refusal's delay",
  ignore,
  async fn() {
    await using db = await twoInstances();
    await waitFor("listening", () => db.b.readGrantEpochStats().listening, 5000);
    const seen = db.b.readGrantEpochStats().epoch;
    for (const payload of ["", "not a number", "-1", "1e400", "token:1", "x".repeat(7000)]) {
      await db.raw`SELECT pg_notify('keygate_grants', ${payload})`;
    }
    for (let i = 0; i < 200; i++) await db.raw`NOTIFY keygate_grants, '1'`;
    await waitFor("delivered", () => db.b.readGrantEpochStats().notifications >= 206, 5000);
    await db.b.refreshGrantEpoch();
    assert.equal(db.b.readGrantEpochStats().epoch, seen);
    assert.ok(await cached(db.cache, 0), "nothing evicted");
    await db.a.revokeToken(db.tokenIds[0], { now: NOW + 2000, ...NO_AUDIT });
    const { ms } = await untilRefused(db.cache, 0, 1000);
    assert.ok(ms < 400, `took ${ms} ms`);
    assert.ok(await cached(db.cache, 1));
  },
});

Deno.test({
  name: "[pg changes] a restored backup (position set back, or its tag changed) empties the caches",
  ignore,
  async fn() {
    await using db = await twoInstances({ b: { pollMs: 60_000, stalenessMs: 120_000 } });
    for (let i = 0; i < 3; i++) {
      await db.a.updateUserTimeout(db.otherUserId, {
        now: NOW,
        tokenTimeoutSeconds: 60 + i,
        ...NO_AUDIT,
      });
    }
    await db.b.refreshGrantEpoch();
    assert.ok(await cached(db.cache, 1), "unrelated changes evicted nothing");
    // The backup's state: the first token revoked, and a record that ends earlier than the one
    // B has seen (it was taken before the last writes).
    await db.raw`UPDATE tokens SET revoked_at = ${NOW} WHERE id = ${db.tokenIds[0]}`;
    await db.raw`DELETE FROM grant_changes
      WHERE position > (SELECT epoch - 2 FROM grant_epoch WHERE id = 1)`;
    await db.raw`UPDATE grant_epoch SET epoch = epoch - 2 WHERE id = 1`;
    await db.b.refreshGrantEpoch();
    assert.equal(await db.cache(KEY, TOKENS[0], NOW + 1000), undefined);
    assert.equal(await cached(db.cache, 1), false, "everything was evicted");
    assert.equal(db.b.readGrantInvalidations().all, 1);
    // A restore that ends at the same position as B has seen: its tag tells it apart.
    assert.ok(await cached(db.cache, 1));
    await db.raw`UPDATE grant_changes SET tag = tag + 1
      WHERE position = (SELECT epoch FROM grant_epoch WHERE id = 1)`;
    await db.b.refreshGrantEpoch();
    assert.equal(await cached(db.cache, 1), false);
    assert.equal(db.b.readGrantInvalidations().all, 2);
  },
});

Deno.test({
  name:
    "[pg changes] a restore that recreates the record at the very position and tag seen still empties the caches",
  ignore,
  async fn() {
    await using db = await twoInstances({ b: { pollMs: 60_000, stalenessMs: 120_000 } });
    assert.ok(await cached(db.cache, 0));
    assert.ok(await cached(db.cache, 1));
    // A dump taken before token 0 was issued, restored with --clean while B runs: the token is
    // gone, the record's tables are new, and the head's position and tag are as B saw them.
    await db.raw.begin(async (tx) => {
      await tx`CREATE TABLE grant_changes_restored (LIKE grant_changes INCLUDING ALL)`;
      await tx`INSERT INTO grant_changes_restored SELECT * FROM grant_changes`;
      await tx`DROP TABLE grant_changes`;
      await tx`ALTER TABLE grant_changes_restored RENAME TO grant_changes`;
      await tx`DELETE FROM tokens WHERE id = ${db.tokenIds[0]}`;
    });
    await db.b.refreshGrantEpoch();
    assert.equal(await db.cache(KEY, TOKENS[0], NOW + 1000), undefined, "a restored-away token");
    assert.equal(await cached(db.cache, 1), false, "everything was evicted");
    assert.equal(db.b.readGrantInvalidations().all, 1);
  },
});

Deno.test({
  name:
    "[pg changes] an instance partitioned longer than the record keeps empties its caches; within it, only what changed",
  ignore,
  async fn() {
    // B does not hear or poll (partitioned); A keeps 3 positions of the record.
    await using db = await twoInstances({
      a: { changeRecordPositions: 3 },
      b: { notifications: false, pollMs: 60_000, stalenessMs: 120_000 },
    });
    // Within the bound: two changes, learned exactly.
    await db.a.revokeToken(db.tokenIds[0], { now: NOW + 2000, ...NO_AUDIT });
    await db.a.updateUserTimeout(db.otherUserId, {
      now: NOW,
      tokenTimeoutSeconds: 60,
      ...NO_AUDIT,
    });
    await db.b.refreshGrantEpoch();
    assert.equal(await db.cache(KEY, TOKENS[0], NOW + 1000), undefined);
    assert.ok(await cached(db.cache, 1));
    assert.equal(db.b.readGrantInvalidations().all, 0);
    // Beyond it: the position B has seen is pruned; B cannot know what it missed.
    await db.a.revokeToken(db.tokenIds[1], { now: NOW + 2000, ...NO_AUDIT });
    for (let i = 0; i < 4; i++) {
      await db.a.updateUserTimeout(db.otherUserId, {
        now: NOW,
        tokenTimeoutSeconds: 61 + i,
        ...NO_AUDIT,
      });
    }
    const [{ n }] = await db.raw<{ n: number }[]>`SELECT count(*)::int AS n FROM grant_changes`;
    assert.ok(n <= 3, `the record keeps ${n} rows`);
    await db.b.refreshGrantEpoch();
    assert.equal(db.b.readGrantInvalidations().all, 1);
    assert.equal(await db.cache(KEY, TOKENS[1], NOW + 1000), undefined);
    assert.equal(await cached(db.cache, 2), false, "everything was evicted");
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
