/**
 * What one lease costs the server, in process, on both backends: `Store.leaseLimits` for keys
 * that each need a new window's units (the rate-limits section's default rate and quota on every
 * key), one key a call against many keys a call. CPU time (this process: the driver, the
 * statements' building and parsing) and wall time per call and per key; PostgreSQL on a
 * throwaway cluster of its own. A guide to the lease's design; `deno task bench` alone judges
 * the targets.
 *
 * Usage: deno run -A scripts/bench/lease_cost.ts [KEYS] [BATCH...]
 *
 * @module
 */
import process from "node:process";
import { openStore } from "../../src/store/open_store.ts";
import type { LimitLeaseRequest, Store } from "../../src/store/store.ts";
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";

const KEYS = Number(Deno.args[0] ?? 2000);
const BATCHES = Deno.args.length > 1 ? Deno.args.slice(1).map(Number) : [1, 10, 50, 200];
const NO_AUDIT = { audit: [] };
const HOUR = 3_600_000;

function cpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

async function seed(store: Store): Promise<{ apiKeyId: number; userId: number }[]> {
  const owners = [];
  for (let i = 0; i < KEYS; i++) {
    const user = await store.insertUser(
      { email: `u${i}@example.org`, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
      { now: 0, ...NO_AUDIT },
    );
    const keyHash = new Uint8Array(32);
    new DataView(keyHash.buffer).setUint32(0, i + 1);
    const key = await store.insertApiKey(
      { userId: user.id, keyHash, prefix: `k${i}`, label: "" },
      { now: 0, ...NO_AUDIT },
    );
    owners.push({ apiKeyId: key.id, userId: user.id });
  }
  const change = { now: 0, ...NO_AUDIT };
  const base = { scope: "default", subjectId: null } as const;
  await store.putLimit({ ...base, kind: "rate", max: 1e9, period: "minute" }, change);
  await store.putLimit({ ...base, kind: "quota", max: 1e12, period: "month" }, change);
  return owners;
}

/** Leases every key's next window in calls of `batch` keys; per key and per call. */
async function measure(
  store: Store,
  owners: { apiKeyId: number; userId: number }[],
  batch: number,
  now: number,
) {
  const want = () => 1000;
  const cpu = cpuMs();
  const started = performance.now();
  let calls = 0;
  for (let i = 0; i < owners.length; i += batch) {
    const requests: LimitLeaseRequest[] = owners.slice(i, i + batch).map((o) => ({
      ...o,
      now,
      want,
    }));
    await store.leaseLimits(requests);
    calls++;
  }
  const wall = performance.now() - started;
  const used = cpuMs() - cpu;
  return {
    batch,
    cpuUsPerKey: (used * 1000) / owners.length,
    wallUsPerKey: (wall * 1000) / owners.length,
    cpuUsPerCall: (used * 1000) / calls,
    wallUsPerCall: (wall * 1000) / calls,
  };
}

async function run(name: string, store: Store) {
  const owners = await seed(store);
  // Each batch size leases every key in a window of its own (an hour apart: a new minute).
  let now = Date.UTC(2026, 0, 1);
  await measure(store, owners, 50, now); // warm: statements prepared, counters created
  for (const batch of BATCHES) {
    now += HOUR;
    const r = await measure(store, owners, batch, now);
    console.log(
      `${name}: ${batch} keys a call: ${r.cpuUsPerKey.toFixed(0)} us CPU and ` +
        `${r.wallUsPerKey.toFixed(0)} us wall per key; ${r.cpuUsPerCall.toFixed(0)} us CPU and ` +
        `${r.wallUsPerCall.toFixed(0)} us wall per call`,
    );
  }
}

const work = Deno.makeTempDirSync({ prefix: "keygate-lease-cost-" });
console.log(`${KEYS} keys, each leasing a new window; load ${Deno.loadavg().join(" ")}`);
try {
  const sqlite = await openStore(`${work}/leases.sqlite3`);
  try {
    await run("SQLite", sqlite.store);
  } finally {
    await sqlite.store.closeStore();
  }
  const cluster = await startPostgres();
  try {
    const pg = await openStore(await cluster.createDatabase("leases"));
    try {
      await run("PostgreSQL", pg.store);
    } finally {
      await pg.store.closeStore();
    }
  } finally {
    await cluster.stop();
  }
} finally {
  Deno.removeSync(work, { recursive: true });
}
