/**
 * The benchmark's "production mix" section (issue 23): secure traffic as an operator's would
 * look while other users' grants keep ending, on SQLite (two keygate processes on one file) and
 * on PostgreSQL (two instances on one database).
 *
 * - `tokens` live tokens (1,000,000 by default), of which the first tenth (up to 100,000: all the
 *   tokens of the first users) are in use, with a Zipf-like popularity (exponent
 *   {@link ZIPF_ALPHA}; wrk's requests.lua `zipf` mode) against instance A;
 * - logins at a steady {@link LOGINS_PER_SECOND} on A (users with a key and no token);
 * - revocations of *other* users' grants at 0, 10, 100 and 1,000 per second through instance B,
 *   in turn a token revocation (`DELETE …/tokens/current`), a key rotation and a revoke-all of
 *   one user (the admin API), each on a user whose tokens A's load never uses;
 * - among those revocations, one to four a second are a probe's: the delay from B's answer to a
 *   token's revocation to A's first 401 for it (A asked one request at a time).
 *
 * Each row reports A's throughput, p99, grant-cache hit ratio over the run (from A's /metrics)
 * and the share of the no-revocation row's rate, the revocations B achieved, the delays, and
 * wrk's CPU share. The revoker, the logins and the probe run in the bench's own process, on
 * wrk's core.
 *
 * @module
 */
import postgres from "postgres";
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import type { BenchContext, SectionReport } from "./context.ts";
import { formatRatio, type Measured, type Row } from "./report.ts";
import { percentile } from "./revocation.ts";
import { seedDatabase, type SeedEntry } from "./seed.ts";
import { copySeedToPostgres } from "./seed_postgres.ts";
import type { Server } from "./servers.ts";
import type { Load, WrkOptions } from "./wrk.ts";

/** What the section needs from the bench's driver. */
export interface ProductionMixContext {
  work: string;
  /** Cores (taskset lists) of instance A, and of B with wrk; undefined: unpinned. */
  serverCore: string | undefined;
  otherCore: string | undefined;
  /** Live tokens seeded. */
  tokens: number;
  /** Seconds per run. */
  duration: number;
  /** The servers' certificate (self-signed), PEM. */
  cert: string;
  /** The shared password hash of every seeded user. */
  passwordHash: string;
  measure(server: Server, load: Load, options?: Partial<WrkOptions>): Promise<Measured>;
  startKeygate(name: string, store: string, cores: string | undefined, extra?: string[]): Promise<
    Server
  >;
  log(message: string): void;
  notes: string[];
}

/** The columns of the section's rows, for the report. */
export const PRODUCTION_MIX_COLUMNS = [
  "hit ratio",
  "of the no-revocation rate",
  "revocations through B",
  "revocation to refusal on A",
];

/** Revocations per second through the other instance, one row each. */
export const REVOCATION_RATES = [0, 10, 100, 1000];
/** The popularity's exponent: the k-th most used token gets a share ∝ 1/k^α. */
const ZIPF_ALPHA = 1.0;
/** Logins on A during every run. */
const LOGINS_PER_SECOND = 2;
/**
 * Revocations per second of the probe, which times revocation to refusal (each one counts in the
 * row's rate: the revoker sends that many fewer); none in the no-revocation row.
 */
const probeRate = (rate: number) => rate === 0 ? 0 : rate <= 10 ? 1 : 4;
/** Revocation requests in flight at most (the revoker falls behind rather than piling up). */
const MAX_OUTSTANDING = 32;
const SECURE = "/api/secure/userservice/tokens/current";

/** A seeded user whose grants A's load never uses: its key, some of its tokens, its ids. */
interface Victim {
  apiKey: string;
  tokens: string[];
  userId: number;
  keyId: number;
}

/** Tokens of each victim user sampled (of its 100). */
const VICTIM_TOKENS = 10;

/**
 * The grant-ending writes of the mix, one user after another: some of its tokens revoked one by
 * one, then its key rotated, then all its tokens revoked.
 */
function* listRevocations(
  users: Victim[],
): Generator<{ victim: Victim; kind: string; token?: string }> {
  for (const victim of users) {
    for (const token of victim.tokens) yield { victim, kind: "token", token };
    yield { victim, kind: "rotate" };
    yield { victim, kind: "user" };
  }
}

/** The "Production mix" section of `deno task bench`, on both backends. */
export async function runProductionMixSection(ctx: BenchContext): Promise<SectionReport> {
  return {
    title: "Production mix",
    rows: await runProductionMix(ctx),
    columns: [...PRODUCTION_MIX_COLUMNS],
  };
}

/** Runs the section on both backends; resolves to its rows (notes go to `ctx.notes`). */
export async function runProductionMix(ctx: ProductionMixContext): Promise<Row[]> {
  const inUse = Math.min(100_000, Math.floor(ctx.tokens / 10));
  const perUser = 100; // seed.ts: one user and one key per 100 tokens (the live-token cap)
  ctx.log(`production mix: seeding ${ctx.tokens.toLocaleString("en")} tokens`);
  const started = performance.now();
  const dbPath = `${ctx.work}/mix.sqlite3`;
  // In use: every token of the first users. Victims: some tokens of every other user.
  const seeded = await seedDatabase(dbPath, {
    tokens: ctx.tokens,
    sample: 0,
    passwordHash: ctx.passwordHash,
    select: (i) => i < inUse || i % perUser < VICTIM_TOKENS,
  });
  const seedSeconds = (performance.now() - started) / 1000;
  const hot = seeded.sample.slice(0, inUse);
  // Sorted by popularity as the Lua script reads them: a shuffled order, so that the hot
  // tokens are spread over users and keys.
  for (let i = hot.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [hot[i], hot[j]] = [hot[j], hot[i]];
  }
  const pairs = `${ctx.work}/mix.pairs`;
  await Deno.writeTextFile(pairs, hot.map((e) => `${e.apiKey} ${e.token} ${e.email}`).join("\n"));
  // Users are numbered from 1 in seeding order, each with one key of the same number.
  const victims: Victim[] = [];
  seeded.sample.slice(inUse).forEach((entry, i) => {
    if (i % VICTIM_TOKENS === 0) {
      const userId = inUse / perUser + i / VICTIM_TOKENS + 1;
      victims.push({ apiKey: entry.apiKey, tokens: [], userId, keyId: userId });
    }
    victims.at(-1)!.tokens.push(entry.token);
  });
  ctx.notes.push(
    `Production mix: ${ctx.tokens.toLocaleString("en")} tokens seeded through the store in ` +
      `${seedSeconds.toFixed(0)} s; ${inUse.toLocaleString("en")} in use, Zipf α ${ZIPF_ALPHA}.`,
  );

  const rows: Row[] = [];
  const cluster = await startPostgres();
  try {
    const url = await cluster.createDatabase("mix");
    ctx.log("production mix: copying into PostgreSQL");
    await copySeedToPostgres(dbPath, url);
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe("ALTER SYSTEM SET fsync = 'on'");
      await admin.unsafe("ALTER SYSTEM SET full_page_writes = 'on'");
    } finally {
      await admin.end();
    }
    await cluster.pause();
    await cluster.resume();
    // Each backend gets its own half of the victims (a revocation is never repeated), and the
    // probe every tenth of them.
    for (
      const [backend, store, half] of [
        ["SQLite, two processes on one file", dbPath, 0],
        ["PostgreSQL, two instances", url, 1],
      ] as const
    ) {
      const mine = victims.filter((_, i) => i % 2 === half);
      rows.push(
        ...await runBackend(ctx, {
          backend,
          store,
          pairs,
          revocations: listRevocations(mine.filter((_, i) => i % 10 !== 0)),
          probes: mine.filter((_, i) => i % 10 === 0).flatMap((v) =>
            v.tokens.map((token) => ({ apiKey: v.apiKey, token }))
          ),
          issuers: seeded.issuers,
        }),
      );
    }
  } finally {
    await cluster.stop();
  }
  return rows;
}

async function runBackend(
  ctx: ProductionMixContext,
  options: {
    backend: string;
    store: string;
    pairs: string;
    revocations: Generator<{ victim: Victim; kind: string; token?: string }>;
    probes: { apiKey: string; token: string }[];
    issuers: SeedEntry[];
  },
): Promise<Row[]> {
  const operator = await createOperator(options.store);
  const [metricsPort, adminPort] = [findFreePort(), findFreePort()];
  const a = await ctx.startKeygate(`mix-a`, options.store, ctx.serverCore, [
    ...["--metrics", "on", "--metrics-port", String(metricsPort)],
  ]);
  const b = await ctx.startKeygate(`mix-b`, options.store, ctx.otherCore, [
    ...["--admin", "on", "--admin-port", String(adminPort)],
  ]);
  const client = Deno.createHttpClient({ caCerts: [ctx.cert] });
  const adminOrigin = `https://127.0.0.1:${adminPort}`;
  const load: Load = { kind: "lua", url: a.origin, args: [options.pairs, "zipf", `${ZIPF_ALPHA}`] };
  const rows: Row[] = [];
  try {
    ctx.log(`production mix, ${options.backend}: warming up`);
    await ctx.measure(a, load, { duration: 3 });
    let base: Measured | undefined;
    for (const rate of REVOCATION_RATES) {
      ctx.log(`production mix, ${options.backend}: ${rate} revocations/s through B`);
      const before = await readCacheCounters(client, metricsPort);
      const stop = { now: false };
      const revoker = revoke({
        rate: rate - probeRate(rate),
        stop,
        client,
        b: b.origin,
        adminOrigin,
        operator,
        revocations: options.revocations,
      });
      const logins = logIn({ stop, client, a: a.origin, issuers: options.issuers });
      const probe = probeDelays({
        stop,
        client,
        a: a.origin,
        b: b.origin,
        probes: rate === 0 ? [] : options.probes,
        everyMs: 1000 / Math.max(1, probeRate(rate)),
      });
      let result: Measured;
      try {
        result = await ctx.measure(a, load, { duration: ctx.duration });
      } finally {
        stop.now = true;
      }
      const [revoked, logged, delays] = [await revoker, await logins, await probe];
      const after = await readCacheCounters(client, metricsPort);
      const hits = after.hits - before.hits;
      const lookups = hits + after.misses - before.misses;
      base ??= result;
      const ms = (n: number | undefined) => n === undefined ? "–" : `${n.toFixed(1)} ms`;
      rows.push({
        scenario: `production mix, ${rate} revocations/s of other grants through B`,
        server: `keygate on ${options.backend}`,
        load: `Lua, ${ZIPF_ALPHA === 1 ? "Zipf" : `Zipf α ${ZIPF_ALPHA}`} over the tokens in use`,
        result,
        extra: {
          "hit ratio": lookups === 0 ? "–" : `${(hits / lookups * 100).toFixed(1)}%`,
          "of the no-revocation rate": rate === 0 ? "(the base)" : formatRatio(result, base),
          "revocations through B":
            `${((revoked.done + delays.length) / ctx.duration).toFixed(0)}/s ` +
            `achieved (${delays.length} of them the probe's, ${revoked.failed} failed); ` +
            `logins on A ${logged}`,
          "revocation to refusal on A": delays.length === 0
            ? "–"
            : `${delays.length} probes: p50 ${ms(percentile(delays, 50))}, ` +
              `p99 ${ms(percentile(delays, 99))}, max ${ms(Math.max(...delays))}`,
        },
      });
    }
  } finally {
    client.close();
    await a.stop();
    await b.stop();
  }
  return rows;
}

/** A free TCP port on 127.0.0.1 (closed again at once; the server takes it next). */
function findFreePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/** Creates a write operator with the admin CLI on `store`; resolves to its token. */
async function createOperator(store: string): Promise<string> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      new URL("../../src/cli/main.ts", import.meta.url).pathname,
      "operator",
      "create",
      `bench${Date.now()}`,
      "--role",
      "write",
      /^postgres/.test(store) ? "--store" : "--db",
      store,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout);
  const token = /kgo_\S+/.exec(text)?.[0];
  if (!output.success || token === undefined) {
    throw new Error(`operator create failed: ${new TextDecoder().decode(output.stderr)}${text}`);
  }
  return token;
}

async function readCacheCounters(client: Deno.HttpClient, port: number) {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`, { client }).catch(() =>
    fetch(`https://127.0.0.1:${port}/metrics`, { client })
  );
  const text = await response.text();
  const value = (result: string) =>
    Number(
      new RegExp(`keygate_cache_lookups_total\\{cache="grant",result="${result}"\\} (\\S+)`)
        .exec(text)?.[1] ?? NaN,
    );
  return { hits: value("hit"), misses: value("miss") };
}

/** Ends other users' grants through B at `rate` per second until told to stop. */
async function revoke(options: {
  rate: number;
  stop: { now: boolean };
  client: Deno.HttpClient;
  b: string;
  adminOrigin: string;
  operator: string;
  revocations: Generator<{ victim: Victim; kind: string; token?: string }>;
}): Promise<{ done: number; failed: number }> {
  let [done, failed, outstanding, sent] = [0, 0, 0, 0];
  if (options.rate <= 0) {
    while (!options.stop.now) await sleep(50);
    return { done, failed };
  }
  const admin = {
    Authorization: `Bearer ${options.operator}`,
    "Content-Type": "application/json",
  };
  const one = async ({ victim, kind, token }: { victim: Victim; kind: string; token?: string }) => {
    const response = kind === "token"
      ? await fetch(`${options.b}${SECURE}?api_key=${victim.apiKey}&api_token=${token}`, {
        method: "DELETE",
        client: options.client,
      })
      : kind === "rotate"
      ? await fetch(`${options.adminOrigin}/admin/v1/keys/${victim.keyId}/rotate`, {
        method: "POST",
        headers: admin,
        body: JSON.stringify({ grace: "1h" }),
        client: options.client,
      })
      : await fetch(`${options.adminOrigin}/admin/v1/users/${victim.userId}/tokens/revoke`, {
        method: "POST",
        headers: admin,
        body: "{}",
        client: options.client,
      });
    await response.arrayBuffer();
    if (response.ok) done++;
    else failed++;
  };
  const started = performance.now();
  const running = new Set<Promise<void>>();
  while (!options.stop.now) {
    const due = Math.floor((performance.now() - started) / 1000 * options.rate);
    while (sent < due && outstanding < MAX_OUTSTANDING) {
      const next = options.revocations.next();
      if (next.done) break;
      const job = one(next.value).catch(() => void failed++).finally(() => {
        outstanding--;
        running.delete(job);
      });
      running.add(job);
      outstanding++;
      sent++;
    }
    await sleep(Math.max(1, 1000 / options.rate / 2));
  }
  await Promise.all(running);
  return { done, failed };
}

/** Logs in at a steady rate on A (users with a key and no token: no cap ends a grant). */
async function logIn(options: {
  stop: { now: boolean };
  client: Deno.HttpClient;
  a: string;
  issuers: SeedEntry[];
}): Promise<string> {
  let [ok, all] = [0, 0];
  while (!options.stop.now) {
    const victim = options.issuers[all % options.issuers.length];
    const response = await fetch(`${options.a}/api/userservice/tokens`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({
        auth_request: {
          user: { email: victim.email, password: "bench password" },
          api_key: victim.apiKey,
        },
      }),
      client: options.client,
    }).catch(() => undefined);
    await response?.arrayBuffer();
    all++;
    if (response?.status === 200) ok++;
    await sleep(1000 / LOGINS_PER_SECOND);
  }
  return `${ok}/${all} answered 200`;
}

/** Every `everyMs`: a victim's token used on A, revoked through B, polled on A until 401. */
async function probeDelays(options: {
  stop: { now: boolean };
  client: Deno.HttpClient;
  a: string;
  b: string;
  probes: { apiKey: string; token: string }[];
  everyMs: number;
}): Promise<number[]> {
  const delays: number[] = [];
  const ask = async (url: string, method = "GET") => {
    const response = await fetch(url, { method, client: options.client });
    await response.arrayBuffer();
    return response.status;
  };
  while (!options.stop.now) {
    const probe = options.probes.pop();
    if (probe === undefined) break;
    const path = `${SECURE}?api_key=${probe.apiKey}&api_token=${probe.token}`;
    if (await ask(options.a + path) !== 200) continue; // ended by a revoke-all already
    await ask(options.a + path); // now in A's cache
    if (await ask(options.b + path, "DELETE") !== 204) continue;
    const answered = performance.now();
    for (;;) {
      const status = await ask(options.a + path);
      if (status === 401) {
        delays.push(performance.now() - answered);
        break;
      }
      if (performance.now() - answered > 5000) throw new Error("A kept accepting a revoked token");
    }
    await sleep(options.everyMs);
  }
  return delays;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
