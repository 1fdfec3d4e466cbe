/**
 * What every section of `deno task bench` measures with: the options, the
 * work directory and certificate, the seeded databases, wrk runs with the
 * server's CPU added (`measure`), alternating rounds (`alternate`), the
 * servers under test, and the notes printed under the tables. The driver
 * (scripts/bench.ts) makes one and hands it to each section in turn.
 *
 * @module
 */
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { generateSelfSigned } from "../../src/platform/tls.ts";
import { type Baseline, openBaseline } from "./baseline.ts";
import type { Measured, SectionRows } from "./report.ts";
import { BENCH_PASSWORD, seedDatabase, type SeedEntry } from "./seed.ts";
import { waitForQuiet } from "./proc.ts";
import { pinTo, type Server, startServer } from "./servers.ts";
import { type Load, runWrk, type WrkOptions } from "./wrk.ts";

/** The bench's options (see scripts/bench.ts for the flags). */
export interface BenchOptions {
  tokens: number;
  duration: number;
  connections: number;
  sample: number;
  /** Rounds of each side-by-side comparison (odd, for a median). */
  rounds: number;
  /** Revocations timed per mode in the PostgreSQL section. */
  revocations: number;
  /** Whether taskset can pin the servers and wrk. */
  taskset: boolean;
  /** `--baseline REV`: an earlier revision the sections that compare with "before" also run. */
  baselineRev?: string;
  /** `--mix-rates`: the production mix's revocation rates (default: all of REVOCATION_RATES). */
  mixRates?: number[];
  /** `--mix-a-flags`: extra Deno flags of the production mix's instance A (e.g. `--cpu-prof`). */
  mixADenoFlags?: string[];
  /** `--mix-limit-rates`: the production mix's rates with a row with limits too (default: 100). */
  mixLimitRates?: number[];
  /** `--mix-limit-headers`: whether the limited rows send the `RateLimit` fields (unset: on). */
  mixLimitHeaders?: boolean;
  /** `--mix-control-rates`: the production mix's rates with a control row too (default: 10, 100). */
  mixControlRates?: number[];
}

/** One section's results: a heading, optional prose around its rows, and the rows. */
export type SectionReport = SectionRows;

export const SECURE_PATH = "/api/secure/userservice/tokens/current";

/** What a section measures with. */
export interface BenchContext extends Omit<BenchOptions, "sample" | "baselineRev"> {
  /** The `--baseline` revision checked out (baseline.ts), or undefined without the flag. */
  baseline: Baseline | undefined;
  /** `--sample`: how many of the tokens wrk's Lua spreads its requests over. */
  sampleSize: number;
  work: string;
  /** The servers' certificate and key, PEM (also in `work`/cert.pem and key.pem). */
  cert: string;
  key: string;
  /** The servers' core (taskset list), or undefined when nothing is pinned. */
  serverCore: string | undefined;
  /** wrk's core. */
  otherCore: string | undefined;
  /** The big SQLite database (`tokens` live tokens). */
  sqlitePath: string;
  /** The argon2id hash of every seeded user's password. */
  passwordHash: string;
  /** Pairs files: the sampled tokens, and users with a key and no token (for logins). */
  pairs: string;
  issuerPairs: string;
  sample: SeedEntry[];
  issuers: SeedEntry[];
  /** Lines printed under the tables. */
  notes: string[];
  /** Results one section leaves for a later one (the secure path's rate, issuance on 1 core). */
  shared: {
    secureLua?: Measured;
    issuance1Core?: Measured;
    /** How long a round waits for a quiet machine: cut short once a wait timed out. */
    quietTimeoutSeconds?: number;
  };
  log(message: string): void;
  measure(server: Server, load: Load, options?: Partial<WrkOptions>): Promise<Measured>;
  alternate(label: string, runs: Record<string, () => Promise<Measured>>): Promise<
    Record<string, Measured>
  >;
  /**
   * Starts keygate on `store` (a SQLite path or a postgres:// URL), pinned to `cores`, with
   * `extra` keygate flags; from the `from` revision's checkout when given (the same flags), with
   * `denoFlags` added to Deno's own (e.g. `--cpu-prof`).
   */
  startKeygate(
    name: string,
    store: string,
    cores: string | undefined,
    extra?: string[],
    options?: StartKeygateOptions,
  ): Promise<Server>;
  /**
   * The keygate on the big database that the secure path, introspection and issuance share,
   * started at the first call; {@link stopBigKeygate} stops it.
   */
  bigKeygate(): Promise<Server>;
  stopBigKeygate(): Promise<void>;
  /** `deno run` argv of a script under scripts/bench/ (pinned by the caller). */
  denoRun(permissions: string[], script: string, args: string[]): string[];
  /** Measured password hashes per second on `cores`. */
  hashRate(cores: string | undefined): Promise<number>;
  /** A pause between runs: logins a worker holds for wrk's last requests still finish. */
  settle(): Promise<unknown>;
  /** wrk's loads against keygate and the bare servers. */
  lua(origin: string, pairs: string, mode: string, ...more: string[]): Load;
  /** The secure GET of the first sampled token, with its secrets in the query or as Bearer. */
  fixedQuery(origin: string): Load;
  fixedBearer(origin: string): Load;
}

/** How {@link BenchContext.startKeygate} runs keygate besides its flags. */
export interface StartKeygateOptions {
  /** An earlier revision's checkout to run instead of this one. */
  from?: Baseline;
  /** Deno flags added to the permissions (e.g. `--cpu-prof`, `--cpu-prof-dir=DIR`). */
  denoFlags?: string[];
}

/** Makes the work directory and certificate, seeds the big database, and returns the context. */
export async function createBenchContext(options: BenchOptions): Promise<BenchContext> {
  const work = await Deno.makeTempDir({ prefix: "keygate-bench-" });
  const { cert, key } = await generateSelfSigned();
  await Deno.writeTextFile(`${work}/cert.pem`, cert);
  await Deno.writeTextFile(`${work}/key.pem`, key);
  const log = (message: string) => console.error(`bench: ${message}`);
  const serverCore = options.taskset ? "0" : undefined;
  const wrkCore = options.taskset ? "1" : undefined;
  const notes: string[] = [];

  log("hashing the shared password");
  const hasher = createPasswordHasher();
  const passwordHash = await hasher.hash(BENCH_PASSWORD);
  hasher.close(); // its worker would keep the bench alive after the report
  log(`seeding ${options.tokens.toLocaleString("en")} live tokens`);
  const sqlitePath = `${work}/big.sqlite3`;
  const big = await seedDatabase(sqlitePath, {
    tokens: options.tokens,
    sample: options.sample,
    passwordHash,
  });
  const one = big.sample[0];

  const denoRun = (permissions: string[], script: string, args: string[]) => [
    Deno.execPath(),
    "run",
    ...permissions,
    new URL(script, import.meta.url).pathname,
    ...args,
  ];
  const startKeygate = (
    name: string,
    store: string,
    cores: string | undefined,
    extra: string[] = [],
    { from, denoFlags = [] }: StartKeygateOptions = {},
  ) => {
    const run = from === undefined
      ? (permissions: string[], script: string, args: string[]) =>
        denoRun([...permissions, ...denoFlags], script, args)
      : (permissions: string[], _script: string, args: string[]) =>
        from.argv([...permissions, ...denoFlags], "main.ts", args);
    return startServer(work, name, pinTo(cores, keygateArgv(run, work, store, extra)), LISTENING);
  };
  const baseline = options.baselineRev === undefined
    ? undefined
    : await openBaseline(options.baselineRev, work);
  if (baseline !== undefined) log(`baseline ${baseline.label} checked out in ${baseline.root}`);
  let big_: Promise<Server> | undefined;

  const { sample: sampleSize, baselineRev: _, ...rest } = options;
  const ctx: BenchContext = {
    ...rest,
    baseline,
    sampleSize,
    work,
    cert,
    key,
    serverCore,
    otherCore: wrkCore,
    sqlitePath,
    passwordHash,
    pairs: await writePairs(work, "big", big.sample),
    issuerPairs: await writePairs(work, "issuers", big.issuers),
    sample: big.sample,
    issuers: big.issuers,
    notes,
    shared: {},
    log,
    async measure(server, load, more = {}) {
      const before = server.readCpuSeconds();
      const result = await runWrk(load, {
        cores: wrkCore,
        threads: 1,
        connections: options.connections,
        duration: options.duration,
        ...more,
      }, work);
      const cpu = server.readCpuSeconds() - before;
      return {
        ...result,
        cpuUsPerRequest: cpu * 1e6 / result.requests,
        serverCores: cpu / result.seconds,
      };
    },
    alternate: (label, runs) => alternate(ctx, label, runs),
    startKeygate,
    bigKeygate: () => big_ ??= startKeygate("keygate-big", sqlitePath, serverCore),
    async stopBigKeygate() {
      const server = big_;
      big_ = undefined;
      await (await server)?.stop();
    },
    denoRun,
    hashRate: (cores) => hashRate(denoRun, cores, Math.min(options.duration, 5)),
    settle: () => new Promise((resolve) => setTimeout(resolve, 1000)),
    lua: (origin, pairs, mode, ...more) => ({
      kind: "lua",
      url: origin,
      args: [pairs, mode, ...more],
    }),
    fixedQuery: (origin) => ({
      kind: "fixed",
      url: `${origin}${SECURE_PATH}?api_key=${one.apiKey}&api_token=${one.token}`,
    }),
    fixedBearer: (origin) => ({
      kind: "fixed",
      url: `${origin}${SECURE_PATH}`,
      headers: { Authorization: `Bearer ${one.token}`, "X-Api-Key": one.apiKey },
    }),
  };
  return ctx;
}

const LISTENING = /keygate listening on https:\/\/[^:]+:(\d+)\//;

function keygateArgv(
  denoRun: BenchContext["denoRun"],
  work: string,
  store: string,
  extra: string[],
): string[] {
  return denoRun(
    [
      "--allow-net",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-ffi",
      "--allow-sys",
      "--unstable-net", // --workers: reusePort over TLS (Deno 2.9)
    ],
    "../../main.ts",
    [
      "--hostname",
      "127.0.0.1",
      "--port",
      "0",
      /^postgres(ql)?:\/\//.test(store) ? "--store" : "--db",
      store,
      "--cert",
      `${work}/cert.pem`,
      "--key",
      `${work}/key.pem`,
      "--log-level",
      "info",
      ...extra,
    ],
  );
}

/**
 * The longest a round waits for a quiet machine: a database just loaded settles in seconds (and
 * before 0.21.0 a fresh server's janitor swept every token row, 15 to 25 s).
 */
const QUIET_TIMEOUT_SECONDS = 60;
/** The same once a wait has timed out in this run. */
const QUIET_TIMEOUT_AFTER_BUSY_SECONDS = 5;

/**
 * Runs every measurement once per round, in turn, so that a slow spell of the machine falls on
 * all alike; returns each one's median round by rate, and notes every round's rate.
 */
async function alternate(
  ctx: BenchContext,
  label: string,
  runs: Record<string, () => Promise<Measured>>,
): Promise<Record<string, Measured>> {
  const all: Record<string, Measured[]> = {};
  for (let round = 1; round <= ctx.rounds; round++) {
    // Servers started for these rows sweep their ended token rows first (the janitor; a walk of
    // every row before 0.21.0), and a database just loaded is vacuumed: none of that may fall
    // into a measured run.
    // A machine busy with work of its own (a shared host) may never be quiet: after one wait
    // has timed out, the later ones wait only a few seconds, so the bench still ends.
    const timeoutSeconds = ctx.shared.quietTimeoutSeconds ?? QUIET_TIMEOUT_SECONDS;
    const wait = await waitForQuiet({ timeoutSeconds });
    if (!wait.quiet) {
      ctx.shared.quietTimeoutSeconds = QUIET_TIMEOUT_AFTER_BUSY_SECONDS;
      ctx.notes.push(
        `${label}, round ${round}: the machine was still ${Math.round(wait.busy * 100)}% busy ` +
          `after ${wait.seconds} s of waiting for it to be quiet; measured anyway.`,
      );
    } else if (wait.seconds > 1) {
      ctx.log(`${label}, round ${round}: waited ${wait.seconds} s for a quiet machine`);
    }
    for (const [name, run] of Object.entries(runs)) {
      ctx.log(`${label}, round ${round}/${ctx.rounds}: ${name}`);
      (all[name] ??= []).push(await run());
    }
  }
  const medians: Record<string, Measured> = {};
  for (const [name, results] of Object.entries(all)) {
    medians[name] = [...results].sort((a, b) => a.rps - b.rps)[results.length >> 1];
    ctx.notes.push(
      `${label}, ${name}: req/s by round ${results.map((r) => r.rps.toFixed(0)).join(", ")}; ` +
        `wrk CPU ${results.map((r) => `${Math.round(r.generatorShare * 100)}%`).join(", ")}.`,
    );
  }
  return medians;
}

/** Writes `entries` as wrk's Lua reads them: `api_key token email` per line. */
export async function writePairs(
  work: string,
  name: string,
  entries: SeedEntry[],
): Promise<string> {
  const path = `${work}/${name}.pairs`;
  await Deno.writeTextFile(
    path,
    entries.map((e) => `${e.apiKey} ${e.token} ${e.email}`).join("\n") + "\n",
  );
  return path;
}

async function hashRate(
  denoRun: BenchContext["denoRun"],
  cores: string | undefined,
  seconds: number,
): Promise<number> {
  const argv = pinTo(
    cores,
    denoRun(["--allow-read", "--allow-env", "--allow-ffi", "--allow-sys"], "./hash_rate.ts", [
      String(seconds),
    ]),
  );
  const output = await new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped" }).output();
  return Number(/hashes_per_second ([\d.]+)/.exec(new TextDecoder().decode(output.stdout))?.[1]);
}
