/**
 * PostgreSQL stores (instances) on one database share its state without conflict: failed
 * logins counted at once add up, key-usage flushes in opposite orders never deadlock, a new
 * database is migrated once (and a store that may not migrate refuses an unmigrated one in one
 * line), and the janitor lease is held by one instance at a time (revocations:
 * postgres_instances_test.ts; outages: postgres_outage_test.ts).
 */
import assert from "node:assert/strict";
import {
  openPostgresStore,
  type PostgresStoreOptions,
} from "../../src/store/postgres/open_postgres_store.ts";
import { POSTGRES_MIGRATIONS } from "../../src/store/postgres/schema.ts";
import type { LoginFailures } from "../../src/store/store.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { digest, NOW, openTwoInstances } from "../_helpers/postgres_instances.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

/** Two stores (instances) on one new database of this file's cluster. */
function twoInstances(options: PostgresStoreOptions = {}) {
  return openTwoInstances(cluster!, options);
}

Deno.test({
  name: "[pg instances] failed logins on two instances at once all count in the shared counter",
  ignore,
  async fn() {
    await using db = await twoInstances();
    const next = (previous: LoginFailures | undefined, subject: string): LoginFailures => ({
      subject,
      failures: (previous?.failures ?? 0) + 1,
      lastFailureAt: NOW,
      blockedUntil: 0,
      forgetAt: NOW + 60_000,
    });
    const subjects = ["client:192.0.2.1", `key:${db.key.id}`];
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 === 0 ? db.a : db.b).recordLoginFailures(
          i % 4 < 2 ? subjects : [...subjects].reverse(),
          {
            now: NOW,
            audit: undefined,
            next,
          },
        )),
    );
    const rows = await db.b.findLoginFailures(subjects, NOW);
    assert.deepEqual(rows.map((row) => [row.subject, row.failures]).sort(), [
      ["client:192.0.2.1", 20],
      [`key:${db.key.id}`, 20],
    ]);
  },
});

Deno.test({
  name:
    "[pg instances] key-usage flushes from two instances in opposite orders add up without deadlock",
  ignore,
  async fn() {
    await using db = await twoInstances();
    const keys = [db.key];
    for (let i = 1; i < 20; i++) {
      keys.push(
        await db.a.insertApiKey(
          { userId: db.user.id, keyHash: digest(`key${i}`), prefix: "kg_x", label: "" },
          { now: NOW, audit: undefined },
        ),
      );
    }
    const usages = keys.map((key, i) => ({
      apiKeyId: key.id,
      lastUsedAt: NOW + i,
      lastUsedFrom: `192.0.2.${i}`,
      count: 2,
    }));
    await Promise.all(
      Array.from(
        { length: 10 },
        (_, i) =>
          (i % 2 === 0 ? db.a : db.b).recordKeyUsage(i % 2 === 0 ? usages : [...usages].reverse()),
      ),
    );
    const listed = await db.b.listApiKeys(db.user.id);
    assert.deepEqual(listed.map((key) => key.useCount), keys.map(() => 20));
    assert.equal(listed[5].lastUsedFrom, "192.0.2.5");
    assert.equal(listed[5].lastUsedAt, NOW + 5);
  },
});

Deno.test({
  name: "[pg instances] four instances opening a new database at once migrate it once",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("instances");
    const stores = await Promise.all(Array.from({ length: 4 }, () => openPostgresStore(url)));
    try {
      for (const store of stores) assert.equal(await store.countRows("users"), 0);
      const { default: postgres } = await import("postgres");
      const admin = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const rows = await admin`SELECT version FROM keygate_migrations WHERE version > 0`;
        assert.equal(rows.length, POSTGRES_MIGRATIONS.length, "each migration once");
      } finally {
        await admin.end();
      }
    } finally {
      await Promise.all(stores.map((store) => store.closeStore()));
    }
  },
});

Deno.test({
  name: "[pg instances] the janitor lease is held by one instance until it expires or is released",
  ignore,
  async fn() {
    await using db = await twoInstances();
    const lease = { name: "janitor", now: NOW, ttlMs: 60_000 };
    const [first, second] = await Promise.all([
      db.a.claimLease({ ...lease, holder: "a" }),
      db.b.claimLease({ ...lease, holder: "b" }),
    ]);
    assert.equal(Number(first) + Number(second), 1, "exactly one holder");
    const holder = first ? "a" : "b";
    const other = first ? "b" : "a";
    assert.equal(await db.b.claimLease({ ...lease, holder, now: NOW + 1000 }), true, "renewed");
    assert.equal(await db.a.claimLease({ ...lease, holder: other, now: NOW + 60_999 }), false);
    assert.equal(await db.a.claimLease({ ...lease, holder: other, now: NOW + 61_000 }), true);
    await db.a.releaseLease({ name: "janitor", holder: other });
    assert.equal(await db.b.claimLease({ ...lease, holder, now: NOW + 61_001 }), true);
  },
});

Deno.test({
  name: "[pg instances] with migrate: false, a store refuses an unmigrated database in one line",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("instances");
    await assert.rejects(
      openPostgresStore(url, { migrate: false }),
      (error: unknown) => {
        assert.ok(error instanceof Error);
        assert.equal(
          error.message,
          `Database schema version 0 is older than this keygate's (${POSTGRES_MIGRATIONS.length}): ` +
            'run "deno task admin db migrate"',
        );
        return true;
      },
    );
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
