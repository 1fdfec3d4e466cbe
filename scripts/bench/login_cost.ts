/**
 * What one login costs PostgreSQL: statements, transactions and CPU per successful login
 * (POST /api/userservice/tokens without HTTP and without argon2: the login flow of
 * src/auth/login.ts over the PostgreSQL store, with a password check that always passes).
 *
 * Not a rate: it runs `--logins` logins one after another on a throwaway cluster
 * (tests/_helpers/postgres_cluster.ts, with `pg_stat_statements` loaded) and reports the cluster's CPU
 * (every process, from /proc) and pg_stat_statements' counts and execution time per login,
 * which a busy machine disturbs far less than a rate. The users are `--users` (each with one
 * key), logged into round-robin, after `--warmup` logins that are not counted (they fill the
 * users' live-token cap as a long run would).
 *
 *     deno run --allow-all scripts/bench/login_cost.ts --logins 3000 --users 20
 *
 * @module
 */
import { parseArgs } from "node:util";
import postgres from "postgres";
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import { listProcessTree, readProcessCpuSeconds } from "./proc.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { createLogin } from "../../src/auth/login.ts";
import { createThrottle } from "../../src/auth/throttle.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { generateApiKey, hashSecret, normalizeApiKey } from "../../src/auth/credentials.ts";
import { toKeyPrefix } from "../../src/auth/credentials.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    logins: { type: "string", default: "3000" },
    users: { type: "string", default: "20" },
    warmup: { type: "string", default: "2500" },
  },
});
const logins = Number(values.logins);
const users = Number(values.users);
const warmup = Number(values.warmup);

/** CPU seconds so far of each process of the cluster, with its kind (backend, walwriter...). */
function readCpuByProcess(postmaster: number): Map<number, { name: string; seconds: number }> {
  const result = new Map<number, { name: string; seconds: number }>();
  for (const pid of listProcessTree(postmaster)) {
    let name = "?";
    try {
      name = Deno.readTextFileSync(`/proc/${pid}/cmdline`).replace(/\0/g, " ").trim();
    } catch { /* gone */ }
    // "postgres: keygate logincost 127.0.0.1(1234) idle" counts as one kind: backends.
    name = / \d+\.\d+\.\d+\.\d+\(/.test(name) ? "backends" : name;
    result.set(pid, { name, seconds: readProcessCpuSeconds(pid) });
  }
  return result;
}

const cluster = await startPostgres();
try {
  const data = `${cluster.dir}/data`;
  await Deno.writeTextFile(
    `${data}/postgresql.auto.conf`,
    // pg_stat_statements, and the bench's settings (scripts/bench/postgres.ts).
    "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'all'\n" +
      "pg_stat_statements.track_planning = on\n" +
      "fsync = on\nfull_page_writes = on\nshared_buffers = '256MB'\n",
    { append: true },
  );
  await cluster.pause();
  await cluster.resume();
  const url = await cluster.createDatabase("logincost");
  const admin = postgres(url, { onnotice: () => {} });
  await admin`CREATE EXTENSION pg_stat_statements`;
  const store = await openPostgresStore(url, { durability: "grants", maxConnections: 4 });
  const now = Date.now();
  const accounts: { email: string; apiKey: string }[] = [];
  for (let u = 0; u < users; u++) {
    const email = `cost${u}@example.org`;
    const user = await store.insertUser(
      { email, passwordHash: "unused", tokenTimeoutSeconds: null },
      { now, audit: undefined },
    );
    const apiKey = generateApiKey();
    await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret(apiKey), prefix: toKeyPrefix(apiKey), label: "" },
      { now, audit: undefined },
    );
    accounts.push({ email, apiKey: normalizeApiKey(apiKey)! });
  }
  const login = createLogin({
    store,
    hasher: { verify: (hash) => Promise.resolve(hash !== undefined) },
    clock: systemClock,
    throttle: createThrottle({ store, clock: systemClock }),
    defaultTimeoutSeconds: 3600,
  });
  const run = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const { email, apiKey } = accounts[i % accounts.length];
      await login({
        credentials: { email, password: "whatever", apiKey },
        clientAddress: "192.0.2.7",
      });
    }
  };
  await run(warmup);
  const postmaster = Number((await Deno.readTextFile(`${data}/postmaster.pid`)).split("\n")[0]);
  await admin`SELECT pg_stat_statements_reset()`;
  const cpuBefore = readCpuByProcess(postmaster);
  // For a profiler: the processes measured (e.g. `perf record -p` with this list).
  if (Deno.env.get("LOGIN_COST_PIDS")) {
    await Deno.writeTextFile(Deno.env.get("LOGIN_COST_PIDS")!, [...cpuBefore.keys()].join(","));
  }
  const started = performance.now();
  await run(logins);
  const wall = performance.now() - started;
  const cpuAfter = readCpuByProcess(postmaster);
  const used = new Map<string, number>();
  for (const [pid, { name, seconds }] of cpuAfter) {
    const spent = seconds - (cpuBefore.get(pid)?.seconds ?? 0);
    used.set(name, (used.get(name) ?? 0) + spent);
  }
  const cpu = [...used.values()].reduce((sum, n) => sum + n, 0);
  const rows = await admin<
    { query: string; calls: number; ms: number; plan_ms: number; plans: number }[]
  >`
    SELECT query, calls::int, total_exec_time AS ms, total_plan_time AS plan_ms, plans::int
    FROM pg_stat_statements
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND query NOT LIKE '%pg_stat_statements%'
    ORDER BY calls DESC, total_exec_time DESC`;
  const per = (n: number) => (n / logins).toFixed(3);
  console.log(`${logins} logins (${users} users, after ${warmup} warm-up logins)`);
  console.log(
    `cluster CPU per login: ${per(cpu * 1000)} ms; client wall per login: ${per(wall)} ms`,
  );
  for (const [name, seconds] of [...used].sort((x, y) => y[1] - x[1])) {
    if (seconds > 0) console.log(`  ${per(seconds * 1000)} ms  ${name}`);
  }
  const calls = rows.reduce((sum, row) => sum + row.calls, 0);
  const exec = rows.reduce((sum, row) => sum + row.ms, 0);
  console.log(
    `statements per login: ${per(calls)}; their execution time per login: ${per(exec)} ms`,
  );
  for (const row of rows) {
    const text = row.query.replace(/\s+/g, " ").slice(0, 110);
    console.log(
      `  ${per(row.calls)}/login ${per(row.ms)} ms (${per(row.plans)} plans, ` +
        `${per(row.plan_ms)} ms)  ${text}`,
    );
  }
  await admin.end();
  await store.closeStore();
} finally {
  await cluster.stop();
}
