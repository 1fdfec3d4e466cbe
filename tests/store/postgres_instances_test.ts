/**
 * Two PostgreSQL stores on one database behave as one: revocations cross (by notification,
 * through a process's shared counter, or by the poll alone, also after a burst), and the
 * change-delay metric counts the other instance's commits (an outage fails closed and recovers:
 * postgres_outage_test.ts; shared counters, flushes, migrations and leases:
 * postgres_coordination_test.ts).
 */
import assert from "node:assert/strict";
import { createGrantCache } from "../../src/auth/grant_cache.ts";
import {
  createSharedGrantCounter,
  openPostgresStore,
  type PostgresStoreOptions,
} from "../../src/store/postgres/open_postgres_store.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { digest, NOW, openTwoInstances, waitForListeners } from "../_helpers/postgres_instances.ts";
import { waitFor } from "../_helpers/wait_for.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

/** Two stores (instances) on one new database of this file's cluster. */
function twoInstances(options: PostgresStoreOptions = {}) {
  return openTwoInstances(cluster!, options);
}

Deno.test({
  name: "[pg instances] a revocation through one instance moves the other's epoch by notification",
  ignore,
  async fn() {
    await using db = await twoInstances({ pollMs: 60_000, stalenessMs: 120_000 });
    await waitForListeners(db.a, db.b);
    assert.equal((await db.b.findTokenGrant(db.lookup))?.tokenId, db.tokenId);
    const before = db.b.readGrantEpoch();
    assert.notEqual(before, undefined);
    assert.equal(await db.a.revokeToken(db.tokenId, { now: NOW + 2000, audit: undefined }), true);
    // The writer's own epoch moved at commit; the other learns by notification.
    const tookMs = await waitFor("notified", () => db.b.readGrantEpoch() !== before, 1000);
    assert.ok(tookMs < 1000);
    assert.equal(await db.b.findTokenGrant(db.lookup), undefined);
    assert.equal(db.b.readGrantEpochStats().notifications, 1);
  },
});

Deno.test({
  name:
    "[pg instances] stores sharing a process counter: a revocation through one moves the other's epoch before it resolves, without notifications",
  ignore,
  async fn() {
    // No NOTIFY, no poll within the test: only the shared counter can move b's epoch.
    const quiet = { notifications: false, pollMs: 60_000, stalenessMs: 120_000 } as const;
    await using db = await twoInstances({
      ...quiet,
      sharedGrantCounter: createSharedGrantCounter(),
    });
    // A third store on the same database without the counter: the control.
    const c = await openPostgresStore(db.url, { ...quiet, applicationName: "keygate-c" });
    try {
      // b's grant cache holds the token (the second lookup is a synchronous hit). The
      // fixture's digests are not SHA-256: every miss reads the fixture's lookup.
      let lookups = 0;
      const cache = createGrantCache({
        readGrantEpoch: () => db.b.readGrantEpoch(),
        readGrantChanges: (since) => db.b.readGrantChanges(since),
        findTokenGrant: ({ now }) => {
          lookups++;
          return db.b.findTokenGrant({ ...db.lookup, now });
        },
      });
      const grant = await cache("key", "token", NOW + 1000);
      assert.equal(grant?.tokenId, db.tokenId);
      assert.equal(cache("key", "token", NOW + 1000), grant, "served from the cache");
      assert.equal(lookups, 1);
      const [bBefore, cBefore] = [db.b.readGrantEpoch(), c.readGrantEpoch()];
      assert.notEqual(bBefore, undefined);

      // A write that ends no grant moves nobody.
      await db.a.appendAudit({ at: NOW, actor: "t", action: "x", subject: "y" });
      assert.equal(db.b.readGrantEpoch(), bBefore);

      assert.equal(await db.a.revokeToken(db.tokenId, { now: NOW + 2000, audit: undefined }), true);
      // At once, with no wait: b's epoch moved; c's (the same database, no counter) did not.
      const bAfter = db.b.readGrantEpoch();
      assert.notEqual(bAfter, undefined);
      assert.notEqual(bAfter, bBefore);
      assert.equal(c.readGrantEpoch(), cBefore);
      assert.equal(db.b.readGrantEpochStats().notifications, 0);
      assert.equal(db.b.readGrantEpochStats().listening, false);
      // The next lookup through b's cache goes to the database and finds the token revoked.
      assert.equal(await cache("key", "token", NOW + 3000), undefined);
      assert.equal(lookups, 2);
      assert.equal(await db.b.findTokenGrant(db.lookup), undefined);
      // The epoch stands still until the next change.
      assert.equal(db.b.readGrantEpoch(), bAfter);
    } finally {
      await c.closeStore();
    }
  },
});

Deno.test({
  name: "[pg instances] every grant-ending write moves the other's epoch; others do not",
  ignore,
  async fn() {
    await using db = await twoInstances({ pollMs: 60_000, stalenessMs: 120_000 });
    await waitForListeners(db.a, db.b);
    const change = { now: NOW + 10, audit: undefined };
    const writes: [string, () => Promise<unknown>, boolean][] = [
      [
        "appendAudit",
        () => db.a.appendAudit({ at: NOW, actor: "t", action: "x", subject: "y" }),
        false,
      ],
      [
        "updateUserTimeout",
        () => db.a.updateUserTimeout(db.user.id, { ...change, tokenTimeoutSeconds: 60 }),
        true,
      ],
      [
        "recordKeyUsage",
        () =>
          db.a.recordKeyUsage([{
            apiKeyId: db.key.id,
            lastUsedAt: NOW,
            lastUsedFrom: "::1",
            count: 1,
          }]),
        false,
      ],
      ["revokeTokensOfUser", () => db.a.revokeTokensOfUser(db.user.id, change), true],
      [
        "updateUserPassword",
        () => db.a.updateUserPassword(db.user.id, { ...change, passwordHash: "$argon2id$y" }),
        true,
      ],
      [
        "updateUserDisabled",
        () => db.a.updateUserDisabled(db.user.id, { ...change, disabled: true }),
        true,
      ],
      [
        "updateApiKeyDisabled",
        () => db.a.updateApiKeyDisabled(db.key.id, { ...change, disabled: true }),
        true,
      ],
      ["revokeApiKey", () => db.a.revokeApiKey(db.key.id, change), true],
    ];
    for (const [name, write, ends] of writes) {
      const before = db.b.readGrantEpochStats().epoch;
      await write();
      if (ends) {
        await waitFor(`${name} notified`, () => db.b.readGrantEpochStats().epoch > before, 1000);
      } else {
        await new Promise((resolve) => setTimeout(resolve, 50));
        assert.equal(db.b.readGrantEpochStats().epoch, before, name);
      }
    }
  },
});

Deno.test({
  name:
    "[pg instances] listener killed with pg_terminate_backend: the revocation is still seen within the poll",
  ignore,
  async fn() {
    await using db = await twoInstances({ pollMs: 200 });
    await waitForListeners(db.a, db.b);
    await db.a.findTokenGrant(db.lookup);
    const [killed] = await Promise.all([
      (async () => {
        const { default: postgres } = await import("postgres");
        const admin = postgres(db.url.replace("?sslmode=disable", ""), {
          max: 1,
          onnotice: () => {},
        });
        try {
          return await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE application_name = 'keygate-b-listener'`;
        } finally {
          await admin.end();
        }
      })(),
    ]);
    assert.equal(killed.length, 1);
    await waitFor("lost listener noticed", () => !db.b.readGrantEpochStats().listening, 2000);
    const epoch = db.b.readGrantEpochStats().epoch;
    await db.a.revokeToken(db.tokenId, { now: NOW + 2000, audit: undefined });
    const tookMs = await waitFor("polled", () => db.b.readGrantEpochStats().epoch > epoch, 1000);
    assert.ok(tookMs <= 1000, `took ${tookMs} ms`);
    assert.equal(await db.b.findTokenGrant(db.lookup), undefined);
    await waitFor("listening again", () => db.b.readGrantEpochStats().listening, 3000);
  },
});

Deno.test({
  name:
    "[pg instances] without notifications (an engine without LISTEN) the poll alone carries a revocation",
  ignore,
  async fn() {
    await using db = await twoInstances({ notifications: false, pollMs: 100 });
    assert.equal(db.b.readGrantEpochStats().listening, false);
    assert.equal((await db.b.findTokenGrant(db.lookup))?.tokenId, db.tokenId);
    const before = db.b.readGrantEpoch();
    await db.a.revokeToken(db.tokenId, { now: NOW + 2000, audit: undefined });
    assert.notEqual(db.a.readGrantEpoch(), undefined);
    const tookMs = await waitFor("polled", () => db.b.readGrantEpoch() !== before, 1000);
    assert.ok(tookMs <= 500, `took ${tookMs} ms`);
    assert.equal(db.b.readGrantEpochStats().notifications, 0);
    assert.equal(await db.b.findTokenGrant(db.lookup), undefined);
  },
});

Deno.test({
  name:
    "[pg instances] the change-delay metric counts another instance's commit, never the instance's own",
  ignore,
  async fn() {
    await using db = await twoInstances();
    // Two more instances on the same database, each with its own metric.
    const delays = { c: [] as number[], d: [] as number[] };
    const open = (name: "c" | "d") =>
      openPostgresStore(db.url, {
        pollMs: 60_000,
        stalenessMs: 120_000,
        applicationName: `keygate-${name}`,
        onChangeDelay: (ms) => delays[name].push(ms),
      });
    const [c, d] = await Promise.all([open("c"), open("d")]);
    try {
      await waitForListeners(c, d);
      assert.equal(await d.revokeToken(db.tokenId, { now: NOW + 2000, audit: undefined }), true);
      // Both hear the notification (every listener hears its own), and both polls read it.
      await waitFor(
        "notified",
        () => [c, d].every((s) => s.readGrantEpochStats().notifications === 1),
        5000,
      );
      await Promise.all([c.refreshGrantEpoch(), d.refreshGrantEpoch()]);
      assert.equal(delays.c.length, 1, "c learned d's commit: one delay");
      assert.ok(delays.c[0] >= 0);
      assert.deepEqual(delays.d, [], "d's own commit is no other instance's change");
      assert.equal(c.readGrantEpochStats().epoch, d.readGrantEpochStats().epoch);
    } finally {
      await Promise.all([c.closeStore(), d.closeStore()]);
    }
  },
});

Deno.test({
  name:
    "[pg instances] after a sustained burst of another instance's revocations, a notification still makes the instance read the record",
  ignore,
  async fn() {
    // No periodic poll within the test: only notifications can move a's position.
    await using db = await twoInstances({ pollMs: 600_000, stalenessMs: 1_200_000 });
    await waitForListeners(db.a, db.b);
    const BURST = 600;
    const ids: number[] = [];
    for (let i = 0; i < BURST; i++) {
      ids.push(
        await db.a.insertToken({
          tokenHash: digest(`burst ${i}`),
          userId: db.user.id,
          apiKeyId: db.key.id,
          issuedAt: NOW,
          expiresAt: NOW + 3_600_000,
          maxLiveTokens: 1_000_000,
        }, { audit: undefined }),
      );
    }
    // b revokes them with 16 writes in flight, as a server under load does.
    let next = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < ids.length) {
        const id = ids[next++];
        assert.equal(await db.b.revokeToken(id, { now: NOW + 2000, audit: undefined }), true);
      }
    }));
    await db.b.refreshGrantEpoch();
    const burstEnd = db.b.readGrantEpochStats().epoch;
    // A poll prompted by one notification may read changes whose notifications are still coming.
    await waitFor(
      "every burst change heard and learned",
      () => {
        const stats = db.a.readGrantEpochStats();
        return stats.notifications === BURST && stats.epoch === burstEnd;
      },
      10_000,
    );
    assert.equal(db.a.readGrantEpochStats().listening, true);
    // After the burst, one more revocation reaches a by its notification alone.
    assert.equal((await db.a.findTokenGrant(db.lookup))?.tokenId, db.tokenId);
    const before = db.a.readGrantEpoch();
    assert.equal(await db.b.revokeToken(db.tokenId, { now: NOW + 2000, audit: undefined }), true);
    await waitFor("notified after the burst", () => db.a.readGrantEpoch() !== before, 10_000);
    assert.deepEqual(db.a.readGrantChanges(before!), [{ kind: "token", id: db.tokenId }]);
    assert.equal(db.a.readGrantEpochStats().notifications, BURST + 1);
    assert.equal(await db.a.findTokenGrant(db.lookup), undefined);
  },
});

Deno.test({
  name: "[pg instances] readGrantEpochStats() counts polls, empty polls and the rows they read",
  ignore,
  async fn() {
    // No listener and no periodic poll within the test: every poll is one this test asks for.
    await using db = await twoInstances({
      notifications: false,
      pollMs: 60_000,
      stalenessMs: 120_000,
    });
    await db.a.refreshGrantEpoch();
    const start = db.a.readGrantEpochStats();
    await db.a.refreshGrantEpoch();
    const idle = db.a.readGrantEpochStats();
    assert.deepEqual(
      [
        idle.polls - start.polls,
        idle.emptyPolls - start.emptyPolls,
        idle.rowsRead - start.rowsRead,
      ],
      [1, 1, 0],
    );
    // One change through b: a's next poll reads its one row, and is not empty.
    assert.equal(await db.b.revokeToken(db.tokenId, { now: NOW + 2000, audit: undefined }), true);
    await db.a.refreshGrantEpoch();
    const after = db.a.readGrantEpochStats();
    assert.deepEqual(
      [
        after.polls - idle.polls,
        after.emptyPolls - idle.emptyPolls,
        after.rowsRead - idle.rowsRead,
      ],
      [1, 0, 1],
    );
    assert.equal(await db.a.findTokenGrant(db.lookup), undefined);
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
