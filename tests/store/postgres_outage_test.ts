/**
 * Two PostgreSQL stores on one database through an outage: a read-only database is a lasting
 * write failure until writes work again, a pool busy past the staleness bound does not fail the
 * epoch closed, and a stopped database fails closed after the staleness bound and recovers after
 * the restart (revocations crossing: postgres_instances_test.ts).
 */
import assert from "node:assert/strict";
import { StoreUnavailable } from "../../src/store/errors.ts";
import type { PostgresStoreOptions } from "../../src/store/postgres/open_postgres_store.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { NOW, openTwoInstances, waitForListeners } from "../_helpers/postgres_instances.ts";
import { waitFor } from "../_helpers/wait_for.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

/** Two stores (instances) on one new database of this file's cluster. */
function twoInstances(options: PostgresStoreOptions = {}) {
  return openTwoInstances(cluster!, options);
}

Deno.test({
  name: "[pg instances] a read-only database is a lasting write failure until writes work again",
  ignore,
  async fn() {
    await using db = await twoInstances({ maxConnections: 1 });
    const { default: postgres } = await import("postgres");
    const admin = postgres(db.url, { max: 1, onnotice: () => {} });
    const database = new URL(db.url).pathname.slice(1);
    const reconnectPool = () =>
      admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE application_name = 'keygate-b' AND datname = ${database}`;
    const change = { now: NOW, audit: undefined };
    try {
      assert.equal(await db.b.findWriteFailure(), undefined);
      await admin.unsafe(`ALTER DATABASE "${database}" SET default_transaction_read_only = on`);
      await reconnectPool();
      let failure: unknown;
      for (let attempt = 0; attempt < 5 && failure === undefined; attempt++) {
        try {
          await db.b.updateUserTimeout(db.user.id, { ...change, tokenTimeoutSeconds: 60 });
        } catch (error) {
          // The first query may meet the terminated connection; the next one reconnects.
          if (!(error instanceof StoreUnavailable)) failure = error;
        }
      }
      assert.ok(failure instanceof Error);
      assert.match(await db.b.findWriteFailure() ?? "", /read-only transaction/);
      await admin.unsafe(`ALTER DATABASE "${database}" RESET default_transaction_read_only`);
      await reconnectPool();
      let recovered: string | undefined = "not yet";
      for (let attempt = 0; attempt < 5 && recovered !== undefined; attempt++) {
        recovered = await db.b.findWriteFailure();
      }
      assert.equal(recovered, undefined, "the probe write succeeds once writes work");
    } finally {
      await admin.end();
    }
  },
});

Deno.test({
  name: "[pg instances] a pool busy past the staleness bound does not fail the epoch closed",
  ignore,
  async fn() {
    await using db = await twoInstances({ maxConnections: 1, pollMs: 100, stalenessMs: 1000 });
    await waitForListeners(db.b);
    const { default: postgres } = await import("postgres");
    const admin = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      let waiting: Promise<void> | undefined;
      await admin.begin(async (tx) => {
        await tx`SELECT id FROM users WHERE id = ${db.user.id} FOR UPDATE`;
        // B's only pooled connection now waits for that row lock for 1.5 s...
        waiting = db.b.updateUserTimeout(db.user.id, {
          now: NOW,
          audit: undefined,
          tokenTimeoutSeconds: 60,
        });
        const until = performance.now() + 1500;
        while (performance.now() < until) {
          // ...while the polls, on the listener's own connection, keep the epoch confirmed.
          assert.notEqual(db.b.readGrantEpoch(), undefined);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      });
      await waiting;
      assert.equal((await db.b.findUserById(db.user.id))!.tokenTimeoutSeconds, 60);
    } finally {
      await admin.end();
    }
  },
});

// Last: stops the server for a while.
Deno.test({
  name:
    "[pg instances] database stopped: fails closed after the staleness bound, recovers after restart",
  ignore,
  async fn() {
    await using db = await twoInstances({ pollMs: 100, stalenessMs: 1000 });
    await waitForListeners(db.a, db.b);
    assert.equal(await db.b.checkStoreReady(), true);
    await cluster!.pause();
    try {
      await waitFor("stale", () => db.b.readGrantEpoch() === undefined, 5000);
      assert.equal(await db.b.checkStoreReady(), false);
      const started = performance.now();
      await assert.rejects(db.b.findTokenGrant(db.lookup), StoreUnavailable);
      assert.ok(
        performance.now() - started < 1000, // the connect timeout is 5 s
        "fails at once, without waiting for a connection",
      );
      await assert.rejects(db.b.findUserById(db.user.id), StoreUnavailable);
    } finally {
      await cluster!.resume();
    }
    await waitFor("confirmed again", () => db.b.readGrantEpoch() !== undefined, 10_000);
    assert.equal(await db.b.checkStoreReady(), true);
    assert.equal((await db.b.findTokenGrant(db.lookup))?.tokenId, db.tokenId);
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
