/**
 * A batch of leases on PostgreSQL racing an operator's deletion of a limit it applies (the
 * review of leases in batches): the lease holds each limit's row before it touches a counter, so
 * a delete committed while the lease waits leaves that limit out of the answer, instead of a
 * counter of a deleted limit (a foreign-key failure that failed the whole batch). The race is held
 * open by a transaction that has deleted the limit and waits for the test to commit, never by
 * timing: the test commits once the lease is seen waiting for a lock.
 *
 * @module
 */
import assert from "node:assert/strict";
import { untilWaiting } from "../_helpers/lock_waits.ts";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { NO_AUDIT, seed, T0 } from "./_contract_fixtures.ts";

const cluster = await startTestCluster();

Deno.test({
  name: "leaseLimits(): a limit deleted while the batch waits for it is left out, not an error",
  ignore: cluster === undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const url = await cluster!.createDatabase("lease_race");
    const store = await openPostgresStore(url);
    const sql = openPostgresClient(parseStoreUrl(url) as PostgresLocation, { max: 2 });
    try {
      const { user, key } = await seed(store);
      const second = await store.insertApiKey(
        { userId: user.id, keyHash: new Uint8Array(32).fill(7), prefix: "second00", label: "" },
        { now: T0, ...NO_AUDIT },
      );
      const rate = await store.putLimit(
        { scope: "default", subjectId: null, kind: "rate", max: 100, period: "minute" },
        { now: T0, ...NO_AUDIT },
      );
      const quota = await store.putLimit(
        { scope: "user", subjectId: user.id, kind: "quota", max: 1000, period: "none" },
        { now: T0, ...NO_AUDIT },
      );
      const owners = [key.id, second.id].map((apiKeyId) => ({ apiKeyId, userId: user.id }));
      // An operator's delete of the default rate, uncommitted until the test says so.
      const deleted = Promise.withResolvers<void>();
      const commit = Promise.withResolvers<void>();
      const deleting = sql.begin(async (tx) => {
        await tx`DELETE FROM limits WHERE id = ${rate.id}`;
        deleted.resolve();
        await commit.promise;
      });
      await deleted.promise;
      const leasing = store.leaseLimits(
        owners.map((owner) => ({ ...owner, now: T0 + 1, want: () => 5 })),
      );
      // The lease waits for the deleted row's lock (not for a timer).
      await untilWaiting(sql, 1);
      commit.resolve();
      await deleting;
      const slices = await leasing;
      assert.deepEqual(
        slices.map((keySlices) => keySlices.map((slice) => slice.rule.id)),
        [[quota.id], [quota.id]],
        "the deleted rate is left out; the user's quota is leased for both keys",
      );
      assert.deepEqual(slices.map((keySlices) => keySlices[0].granted), [5, 5]);
      const [usage] = await sql<{ used: number }[]>`SELECT used::int FROM limit_usage
        WHERE limit_id = ${quota.id}`;
      assert.equal(usage.used, 10, "one counter for the user's quota, both grants in it");
      const [orphans] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM limit_usage
        WHERE limit_id = ${rate.id}`;
      assert.equal(orphans.n, 0, "no counter of the deleted limit");
    } finally {
      await sql.end();
      await store.closeStore();
    }
  },
});
