/**
 * The grant-epoch watcher against a real PostgreSQL: notifications, the poll
 * when the listener is killed or absent, and failing closed while the
 * database is down.
 */
import assert from "node:assert/strict";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import {
  bumpGrantEpoch,
  createGrantEpochWatcher,
  type GrantEpochWatcherOptions,
} from "../../src/store/postgres/grant_epoch.ts";
import { migratePostgres } from "../../src/store/postgres/migrate.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { waitFor } from "../_helpers/wait_for.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

/** A migrated database, a writer client and a watcher on it. */
async function setUp(options: Partial<GrantEpochWatcherOptions> & { listen?: boolean } = {}) {
  const location = parseStoreUrl(await cluster!.createDatabase("epoch")) as PostgresLocation;
  const writer = openPostgresClient(location, { max: 2 });
  await migratePostgres(writer);
  const pool = openPostgresClient(location, { max: 2, applicationName: "keygate-pool" });
  const watcher = createGrantEpochWatcher({
    sql: pool,
    openListener: options.listen === false
      ? undefined
      : (hooks) =>
        openPostgresClient(location, { max: 1, applicationName: "keygate-listener", ...hooks }),
    ...options,
  });
  await watcher.ready();
  return {
    writer,
    watcher,
    async revoke(notify = true): Promise<number> {
      return await writer.begin((tx) => bumpGrantEpoch(tx, notify));
    },
    async close() {
      await watcher.close();
      await pool.end({ timeout: 0 });
      await writer.end({ timeout: 0 });
    },
  };
}

async function waitForListener(db: Awaited<ReturnType<typeof setUp>>): Promise<void> {
  await waitFor("listening", () => db.watcher.stats().listening, 5000);
}

Deno.test({
  name: "grant epoch: a committed bump reaches another watcher by notification, not the poll",
  ignore,
  async fn() {
    const db = await setUp({ pollMs: 60_000, stalenessMs: 120_000 });
    try {
      await waitForListener(db);
      const before = db.watcher.read();
      assert.notEqual(before, undefined);
      const epoch = await db.revoke();
      const tookMs = await waitFor("notified", () => db.watcher.read() !== before, 1000);
      assert.ok(tookMs < 1000, `took ${tookMs} ms`);
      assert.equal(db.watcher.stats().epoch, epoch);
      assert.equal(db.watcher.stats().notifications, 1);
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name: "grant epoch: a rolled-back bump notifies nobody and moves nothing",
  ignore,
  async fn() {
    const db = await setUp({ pollMs: 50 });
    try {
      await waitForListener(db);
      const before = db.watcher.read();
      await assert.rejects(
        db.writer.begin(async (tx) => {
          await bumpGrantEpoch(tx);
          throw new Error("roll back");
        }),
        /roll back/,
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(db.watcher.read(), before);
      assert.equal(db.watcher.stats().notifications, 0);
      assert.equal(db.watcher.stats().epoch, 2); // 1, and the change record's migration
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name: "grant epoch: with the listener killed by pg_terminate_backend, the poll still sees a bump",
  ignore,
  async fn() {
    const db = await setUp({ pollMs: 100 });
    try {
      await waitForListener(db);
      const versionBefore = db.watcher.read();
      const killed = await db.writer`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
        WHERE application_name = 'keygate-listener' AND datname = current_database()`;
      assert.equal(killed.length, 1);
      assert.equal(killed[0].ok, true);
      // Losing the listener drops nothing: the poll reads what notifications would have said.
      await waitFor("told of the lost listener", () => !db.watcher.stats().listening, 2000);
      assert.equal(db.watcher.read(), versionBefore);
      const epoch = await db.revoke(false); // no notification: only the poll can tell
      await waitFor("polled", () => db.watcher.stats().epoch === epoch, 500);
      // And the listener comes back on the next poll.
      await waitFor("listening again", () => db.watcher.stats().listening, 2000);
      assert.equal(db.watcher.stats().listens, 2);
      const next = await db.revoke();
      await waitFor("notified again", () => db.watcher.stats().epoch === next, 1000);
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name:
    "grant epoch: without a listener (an engine without LISTEN) the poll alone bounds the delay",
  ignore,
  async fn() {
    const db = await setUp({ listen: false, pollMs: 100 });
    try {
      const before = db.watcher.read();
      const epoch = await db.revoke(false);
      const tookMs = await waitFor("polled", () => db.watcher.read() !== before, 1000);
      assert.ok(tookMs <= 400, `took ${tookMs} ms`);
      assert.equal(db.watcher.stats().epoch, epoch);
      assert.equal(db.watcher.stats().listening, false);
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name: "grant epoch: an injected clock past the staleness bound reads undefined until a poll",
  ignore,
  async fn() {
    let clock = 0;
    const db = await setUp({
      listen: false,
      pollMs: 60_000,
      stalenessMs: 2000,
      monotonicNow: () => clock,
    });
    try {
      assert.notEqual(db.watcher.read(), undefined);
      clock = 2000;
      assert.notEqual(db.watcher.read(), undefined);
      clock = 2001;
      assert.equal(db.watcher.read(), undefined);
      assert.equal(db.watcher.stats().lagMs, 2001);
      await db.watcher.pollNow();
      assert.notEqual(db.watcher.read(), undefined);
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name: "grant epoch: a counter set back (a pg_restore of an older dump) still moves the version",
  ignore,
  async fn() {
    const db = await setUp({ listen: false, pollMs: 60_000 });
    try {
      const start = db.watcher.stats().epoch;
      for (let i = 0; i < 5; i++) await db.revoke();
      await db.watcher.pollNow();
      assert.equal(db.watcher.stats().epoch, start + 5);
      // The restore puts back the epoch of an older dump: what the cache holds may be wrong now.
      await db.writer`UPDATE grant_epoch SET epoch = ${start + 2} WHERE id = 1`;
      let version = db.watcher.read();
      await db.watcher.pollNow();
      assert.notEqual(db.watcher.read(), version, "the restore drops the cache");
      // A revocation after the restore bumps the counter below the one seen before it.
      version = db.watcher.read();
      assert.equal(await db.revoke(), start + 3);
      await db.watcher.pollNow();
      assert.notEqual(db.watcher.read(), version, "a revocation after the restore drops the cache");
      assert.equal(db.watcher.stats().epoch, start + 3);
    } finally {
      await db.close();
    }
  },
});

// Last: stops the server for a while.
Deno.test({
  name:
    "grant epoch: database stopped → cannot confirm after the staleness bound; recovers after restart",
  ignore,
  async fn() {
    const db = await setUp({ pollMs: 100, stalenessMs: 1000 });
    try {
      await waitForListener(db);
      assert.notEqual(db.watcher.read(), undefined);
      const stoppedAt = performance.now();
      await cluster!.pause();
      await waitFor("stale", () => db.watcher.read() === undefined, 5000);
      assert.ok(db.watcher.stats().lagMs > 1000);
      assert.ok(performance.now() - stoppedAt < 3000, "within the bound, give or take a poll");
      assert.equal(db.watcher.stats().listening, false);
      await cluster!.resume();
      await waitFor("confirmed again", () => db.watcher.read() !== undefined, 10_000);
      await waitFor("listening again", () => db.watcher.stats().listening, 5000);
      const epoch = await db.revoke();
      await waitFor("notified after restart", () => db.watcher.stats().epoch === epoch, 2000);
    } finally {
      await db.close();
    }
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
