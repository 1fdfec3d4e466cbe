/**
 * `deno task bench`: measures keygate against an honest ceiling and a peer,
 * side by side in one run, and writes the tables into docs/performance.md
 * (see its "Methodology" for what each column means).
 *
 * - The ceiling: a bare `Deno.serve` over HTTPS, driven with a fixed URL (wrk's static request,
 *   no Lua per request), the load that reaches the server's limit rather than wrk's.
 * - keygate's secure path with that same fixed URL, and with 10,000+ distinct tokens built by
 *   Lua; ratios both ways. Every row reports wrk's own CPU share, and no ratio is printed with a
 *   run in which wrk was saturated (see GENERATOR_LIMIT in scripts/bench/report.ts).
 * - The peer: oidc-provider answering RFC 7662 introspection, beside keygate's introspection.
 * - Issuance against the password-hash limit and secure p99 while issuance is saturated.
 * - Every core: the bare server with one listener per core (threads, then processes, sharing the
 *   port with reusePort) and keygate --workers 1 and N, with nothing pinned.
 * - PostgreSQL beside SQLite (scripts/bench/postgres.ts): warm and all-miss secure path,
 *   revocation seen by a second instance, issuance; on a throwaway cluster the bench starts.
 *
 * Servers are pinned to core 0 with `taskset` (when available) and wrk to core 1, except in the
 * last section.
 *
 * Usage: deno task bench [--tokens N] [--duration S] [--connections N] [--sample N]
 *                        [--rounds N] [--revocations N] [--only SECTIONS] [--output FILE]
 *                        [--no-write]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { createPasswordHasher } from "../src/passwords/passwords.ts";
import { generateSelfSigned } from "../src/platform/tls.ts";
import { PEER_CLIENT_ID, PEER_CLIENT_SECRET } from "./bench/peer_server.ts";
import {
  findInvalidRun,
  formatCpuRatio,
  formatRatio,
  formatRows,
  GENERATOR_LIMIT,
  type Measured,
  type Row,
  wrapMarkdown,
  writeResults,
} from "./bench/report.ts";
import { runPostgresSection } from "./bench/postgres.ts";
import { type BurstResult, runBurstProcess } from "./bench/burst_client.ts";
import { BENCH_PASSWORD, seedDatabase, type SeedEntry } from "./bench/seed.ts";
import { pinTo, type Server, startServer } from "./bench/servers.ts";
import { type Load, runWrk, type WrkOptions, type WrkResult } from "./bench/wrk.ts";

/** The sections `--only` can pick, in the order they run. */
const SECTIONS = ["secure", "introspection", "issuance", "scaling", "postgres"] as const;
const USAGE = "Usage: deno task bench [--tokens N] [--duration S] [--connections N] [--sample N] " +
  `[--rounds N] [--revocations N] [--only ${SECTIONS.join(",")}] [--output FILE] [--no-write]`;
const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    tokens: { type: "string", default: "1000000" },
    duration: { type: "string", default: "10" },
    connections: { type: "string", default: "50" },
    sample: { type: "string", default: "10000" },
    rounds: { type: "string", default: "3" },
    revocations: { type: "string", default: "200" },
    only: { type: "string", default: SECTIONS.join(",") },
    output: { type: "string", default: "docs/performance.md" },
    "no-write": { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
});
if (flags.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const TOKENS = Number(flags.tokens);
const DURATION = Number(flags.duration);
const CONNECTIONS = Number(flags.connections);
const SAMPLE = Number(flags.sample);
/** Rounds of each side-by-side comparison (odd, for a median). */
const ROUNDS = Number(flags.rounds);
/**
 * Logins held in the queue in the burst rows (each answered one sent again at once, so the queue
 * stays this deep for the whole run): the issue's 100, × 16 ms on one core is 1.6 s, within the
 * default --login-queue-wait. The row the target is judged on sends them from clients that
 * honour Retry-After (scripts/bench/burst_client.ts); the stress row beside it from wrk, which
 * sends a refused login again at once (docs/performance.md, "Login bursts").
 */
const BURST_LOGINS = 100;
/** Revocations timed per mode in the PostgreSQL section. */
const REVOCATIONS = Number(flags.revocations);
const ONLY = new Set(flags.only.split(",").map((name) => name.trim()));
for (const name of ONLY) {
  if (!(SECTIONS as readonly string[]).includes(name)) {
    console.error(`bench: --only: unknown section "${name}" (${SECTIONS.join(", ")})\n${USAGE}`);
    Deno.exit(2);
  }
}
/** Whether `section` runs (all of them unless --only names some). */
const wants = (section: (typeof SECTIONS)[number]) => ONLY.has(section);
/** A run of some sections only: printed, never written into the docs. */
const PARTIAL = SECTIONS.some((section) => !wants(section));
const SECURE_PATH = "/api/secure/userservice/tokens/current";
const INTROSPECT_PATH = "/api/userservice/tokens/introspect";
const PEER_INTROSPECT_PATH = "/token/introspection";

async function commandExists(name: string): Promise<boolean> {
  try {
    await new Deno.Command(name, { args: ["--version"], stdout: "null", stderr: "null" }).output();
    return true;
  } catch {
    return false;
  }
}

if (!(await commandExists("wrk"))) {
  console.error("bench: wrk is missing: install it with `apt-get install wrk` (Debian/Ubuntu)");
  Deno.exit(1);
}
const TASKSET = await commandExists("taskset");
/** Cores of the servers and of wrk (undefined: unpinned, taskset missing). */
const SERVER_CORE = TASKSET ? "0" : undefined;
const WRK_CORE = TASKSET ? "1" : undefined;

const work = await Deno.makeTempDir({ prefix: "keygate-bench-" });
const { cert, key } = await generateSelfSigned();
await Deno.writeTextFile(`${work}/cert.pem`, cert);
await Deno.writeTextFile(`${work}/key.pem`, key);

function log(message: string) {
  console.error(`bench: ${message}`);
}

/** Runs wrk against `server` and adds what the server spent, read from /proc. */
async function measure(
  server: Server,
  load: Load,
  options: Partial<WrkOptions> = {},
): Promise<Measured> {
  const before = server.readCpuSeconds();
  const result = await runWrk(load, {
    cores: WRK_CORE,
    threads: 1,
    connections: CONNECTIONS,
    duration: DURATION,
    ...options,
  }, work);
  const cpu = server.readCpuSeconds() - before;
  return {
    ...result,
    cpuUsPerRequest: cpu * 1e6 / result.requests,
    serverCores: cpu / result.seconds,
  };
}

/**
 * Runs every measurement once per round, in turn, so that a slow spell of the machine falls on
 * all alike; returns each one's median round by rate, and every round's rate for the notes.
 */
async function alternate(
  label: string,
  runs: Record<string, () => Promise<Measured>>,
): Promise<Record<string, Measured>> {
  const all: Record<string, Measured[]> = {};
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, run] of Object.entries(runs)) {
      log(`${label}, round ${round}/${ROUNDS}: ${name}`);
      (all[name] ??= []).push(await run());
    }
  }
  const medians: Record<string, Measured> = {};
  for (const [name, results] of Object.entries(all)) {
    medians[name] = [...results].sort((a, b) => a.rps - b.rps)[results.length >> 1];
    notes.push(
      `${label}, ${name}: req/s by round ${results.map((r) => r.rps.toFixed(0)).join(", ")}; ` +
        `wrk CPU ${results.map((r) => `${Math.round(r.generatorShare * 100)}%`).join(", ")}.`,
    );
  }
  return medians;
}

async function writePairs(name: string, entries: SeedEntry[]): Promise<string> {
  const path = `${work}/${name}.pairs`;
  await Deno.writeTextFile(
    path,
    entries.map((e) => `${e.apiKey} ${e.token} ${e.email}`).join("\n") + "\n",
  );
  return path;
}

const denoRun = (permissions: string[], script: string, args: string[]) => [
  Deno.execPath(),
  "run",
  ...permissions,
  new URL(script, import.meta.url).pathname,
  ...args,
];

function startKeygate(
  name: string,
  dbPath: string,
  cores: string | undefined,
  extraArgs: string[] = [],
) {
  return startServer(
    work,
    name,
    pinTo(
      cores,
      denoRun(
        [
          "--allow-net",
          "--allow-read",
          "--allow-write",
          "--allow-env",
          "--allow-ffi",
          "--allow-sys",
          "--unstable-net", // --workers: reusePort over TLS (Deno 2.9)
        ],
        "../main.ts",
        [
          "--hostname",
          "127.0.0.1",
          "--port",
          "0",
          /^postgres(ql)?:\/\//.test(dbPath) ? "--store" : "--db",
          dbPath,
          "--cert",
          `${work}/cert.pem`,
          "--key",
          `${work}/key.pem`,
          "--log-level",
          "info",
          ...extraArgs,
        ],
      ),
    ),
    /keygate listening on https:\/\/[^:]+:(\d+)\//,
  );
}

/**
 * A pause between runs: wrk stops with requests in flight, and the logins a worker already
 * holds for them still finish. Without it the next run starts against a busy pool.
 */
const settle = () => new Promise((resolve) => setTimeout(resolve, 1000));

const secureRows: Row[] = [];
const introspectionRows: Row[] = [];
const otherRows: Row[] = [];
const scalingRows: Row[] = [];
const notes: string[] = [];
let postgresSection: string | undefined;
const RATIO_SAME = "keygate/bare, same load";
const RATIO_CEILING = "keygate/bare fixed (ceiling)";
const RATIO_CPU = "bare/keygate server CPU per request";
/** The bare server answering as keygate does: what is left is keygate's own work. */
const RATIO_SHAPED = "bare as keygate/keygate server CPU per request";
const RATIO_PEER = "keygate/peer, same load";
const NOTE = "note";
const RSS_PER_WORKER = "RSS MiB per worker";
const SCALING = "× 1 worker";

try {
  log("hashing the shared password");
  const hasher = createPasswordHasher();
  const passwordHash = await hasher.hash(BENCH_PASSWORD);
  hasher.close(); // its worker would keep the bench alive after the report
  log(`seeding ${TOKENS.toLocaleString("en")} live tokens`);
  const big = await seedDatabase(`${work}/big.sqlite3`, {
    tokens: TOKENS,
    sample: SAMPLE,
    passwordHash,
  });
  const bigPairs = await writePairs("big", big.sample);
  const issuerPairs = await writePairs("issuers", big.issuers);
  const introspector = big.issuers[0].apiKey;
  const one = big.sample[0];
  const lua = (origin: string, pairs: string, mode: string, ...more: string[]): Load => ({
    kind: "lua",
    url: origin,
    args: [pairs, mode, ...more],
  });
  const fixedQuery = (origin: string): Load => ({
    kind: "fixed",
    url: `${origin}${SECURE_PATH}?api_key=${one.apiKey}&api_token=${one.token}`,
  });
  const fixedBearer = (origin: string): Load => ({
    kind: "fixed",
    url: `${origin}${SECURE_PATH}`,
    headers: { Authorization: `Bearer ${one.token}`, "X-Api-Key": one.apiKey },
  });

  const fixedLoad = "fixed URL";
  const luaLoad = `Lua, ${SAMPLE.toLocaleString("en")} tokens`;
  const millionTokens = `${TOKENS.toLocaleString("en")} tokens`;
  // The secure path, introspection and issuance share one keygate on the big database.
  const keygate = wants("secure") || wants("introspection") || wants("issuance")
    ? await startKeygate("keygate-big", `${work}/big.sqlite3`, SERVER_CORE)
    : undefined;
  let secureLua: Measured | undefined;

  // --- Secure path against the ceiling -------------------------------------------------
  if (keygate !== undefined && wants("secure")) {
    const smallTokens = Math.min(1000, TOKENS);
    log(`seeding ${smallTokens} live tokens`);
    const small = await seedDatabase(`${work}/small.sqlite3`, {
      tokens: smallTokens,
      sample: smallTokens,
      passwordHash,
    });
    const smallPairs = await writePairs("small", small.sample);
    const bare = await startServer(
      work,
      "bare",
      pinTo(
        SERVER_CORE,
        denoRun(["--allow-net", "--allow-read"], "./bench/bare_server.ts", [
          `${work}/cert.pem`,
          `${work}/key.pem`,
        ]),
      ),
      /listening (\d+)/,
    );
    const shaped = await startServer(
      work,
      "bare-shaped",
      pinTo(
        SERVER_CORE,
        denoRun(["--allow-net", "--allow-read", "--allow-ffi"], "./bench/bare_server.ts", [
          "--keygate-shape",
          `${work}/cert.pem`,
          `${work}/key.pem`,
        ]),
      ),
      /listening (\d+)/,
    );
    const keygateSmall = await startKeygate("keygate-small", `${work}/small.sqlite3`, SERVER_CORE);
    log("warming up the servers");
    await measure(bare, fixedQuery(bare.origin), { duration: 2 });
    await measure(shaped, fixedBearer(shaped.origin), { duration: 2 });
    await measure(keygate, lua(keygate.origin, bigPairs, "query"), { duration: 2 });
    await measure(keygateSmall, lua(keygateSmall.origin, smallPairs, "query"), { duration: 2 });
    const secure = await alternate("secure path", {
      "bare, fixed": () => measure(bare, fixedQuery(bare.origin)),
      "bare, lua": () => measure(bare, lua(bare.origin, bigPairs, "query")),
      "bare as keygate, fixed bearer": () => measure(shaped, fixedBearer(shaped.origin)),
      "keygate, fixed query": () => measure(keygate, fixedQuery(keygate.origin)),
      "keygate, fixed bearer": () => measure(keygate, fixedBearer(keygate.origin)),
      "keygate, lua query": () => measure(keygate, lua(keygate.origin, bigPairs, "query")),
      "keygate, lua bearer": () => measure(keygate, lua(keygate.origin, bigPairs, "bearer")),
      "keygate 1k, lua query": () =>
        measure(keygateSmall, lua(keygateSmall.origin, smallPairs, "query")),
    });
    const smallRss = keygateSmall.readRssMiB();
    await keygateSmall.stop(); // idle from here on; stopped so that it cannot disturb what follows
    const ceiling = secure["bare, fixed"];
    secureRows.push(
      {
        scenario: "secure GET (answers 3 bytes)",
        server: "bare Deno.serve",
        load: fixedLoad,
        result: ceiling,
        rssMiB: bare.readRssMiB(),
        extra: { [RATIO_CEILING]: "(the ceiling)" },
      },
      {
        scenario: "secure GET (answers 3 bytes)",
        server: "bare Deno.serve",
        load: luaLoad,
        result: secure["bare, lua"],
        extra: { [RATIO_CEILING]: formatRatio(secure["bare, lua"], ceiling) },
      },
    );
    const asKeygate = secure["bare as keygate, fixed bearer"];
    secureRows.push({
      scenario: "secure GET answered as keygate answers (its headers, its body size)",
      server: "bare Deno.serve",
      load: fixedLoad,
      result: asKeygate,
      rssMiB: shaped.readRssMiB(),
      extra: {
        [RATIO_CEILING]: formatRatio(asKeygate, ceiling),
        [RATIO_CPU]: formatCpuRatio(ceiling, asKeygate),
      },
    });
    await bare.stop();
    await shaped.stop();
    const keygateRss = keygate.readRssMiB();
    for (
      const [name, scenario, load, sameLoad] of [
        [
          "keygate, fixed query",
          `secure GET, api_token in query, ${millionTokens}`,
          fixedLoad,
          ceiling,
        ],
        ["keygate, fixed bearer", `secure GET, Bearer, ${millionTokens}`, fixedLoad, ceiling],
        ["keygate, lua query", `secure GET, api_token in query, ${millionTokens}`, luaLoad, "lua"],
        ["keygate, lua bearer", `secure GET, Bearer, ${millionTokens}`, luaLoad, "lua"],
      ] as const
    ) {
      const result = secure[name];
      secureRows.push({
        scenario,
        server: "keygate",
        load,
        result,
        rssMiB: keygateRss,
        extra: {
          [RATIO_SAME]: formatRatio(result, sameLoad === "lua" ? secure["bare, lua"] : ceiling),
          [RATIO_CEILING]: formatRatio(result, ceiling),
          [RATIO_CPU]: formatCpuRatio(ceiling, result),
          [RATIO_SHAPED]: formatCpuRatio(asKeygate, result),
        },
      });
    }
    const smallQuery = secure["keygate 1k, lua query"];
    secureRows.push({
      scenario: `secure GET, api_token in query, ${smallTokens.toLocaleString("en")} tokens`,
      server: "keygate",
      load: `Lua, ${smallTokens.toLocaleString("en")} tokens`,
      result: smallQuery,
      rssMiB: smallRss,
      extra: {
        [RATIO_SAME]: formatRatio(smallQuery, secure["bare, lua"]),
        [RATIO_CEILING]: formatRatio(smallQuery, ceiling),
        [RATIO_CPU]: formatCpuRatio(ceiling, smallQuery),
      },
    });
    notes.push(
      `With ${millionTokens} the secure path (Lua, query) runs at ${
        (secure["keygate, lua query"].rps / smallQuery.rps * 100).toFixed(0)
      }% of its rate with ${smallTokens.toLocaleString("en")} (medians).`,
    );

    secureLua = secure["keygate, lua query"];
  }

  // --- Introspection against the peer ---------------------------------------------------
  if (keygate !== undefined && wants("introspection")) {
    log(`starting the peer (oidc-provider) with ${SAMPLE.toLocaleString("en")} tokens`);
    const peer = await startServer(
      work,
      "peer",
      pinTo(
        SERVER_CORE,
        denoRun(
          [
            "--config",
            new URL("./bench/peer.json", import.meta.url).pathname,
            "--lock",
            new URL("./bench/peer.lock", import.meta.url).pathname,
            "--allow-net",
            "--allow-read",
            "--allow-write",
            "--allow-env",
            "--allow-sys",
          ],
          "./bench/peer_server.ts",
          [`${work}/cert.pem`, `${work}/key.pem`, `${work}/peer.pairs`, String(SAMPLE)],
        ),
      ),
      /listening (\d+)/,
    );
    const peerPairs = `${work}/peer.pairs`;
    const peerToken = (await Deno.readTextFile(peerPairs)).split("\n")[0].split(" ")[1];
    const basic = `Basic ${btoa(`${PEER_CLIENT_ID}:${PEER_CLIENT_SECRET}`)}`;
    const form = {
      "Content-Type": "application/x-www-form-urlencoded",
      Accept: "application/json",
    };
    const peerFixed: Load = {
      kind: "fixed",
      url: `${peer.origin}${PEER_INTROSPECT_PATH}`,
      method: "POST",
      headers: { ...form, Authorization: basic },
      body: `token=${peerToken}`,
    };
    const keygateFixed: Load = {
      kind: "fixed",
      url: `${keygate.origin}${INTROSPECT_PATH}`,
      method: "POST",
      headers: { ...form, "X-Api-Key": introspector },
      body: `token=${one.token}`,
    };
    const peerLua = lua(
      `${peer.origin}${PEER_INTROSPECT_PATH}`,
      peerPairs,
      "introspect",
      "Authorization",
      basic,
    );
    const keygateLua = lua(
      `${keygate.origin}${INTROSPECT_PATH}`,
      bigPairs,
      "introspect",
      "X-Api-Key",
      introspector,
    );
    log("warming up the peer");
    await measure(peer, peerLua, { duration: 2 });
    await measure(keygate, keygateLua, { duration: 2 });
    const introspection = await alternate("introspection", {
      "peer, fixed": () => measure(peer, peerFixed),
      "keygate, fixed": () => measure(keygate, keygateFixed),
      "peer, lua": () => measure(peer, peerLua),
      "keygate, lua": () => measure(keygate, keygateLua),
    });
    const peerRss = peer.readRssMiB();
    await peer.stop();
    const peerName = "oidc-provider 9.13.3 (under Deno)";
    for (const [load, suffix] of [[fixedLoad, "fixed"], [luaLoad, "lua"]] as const) {
      const theirs = introspection[`peer, ${suffix}`];
      const ours = introspection[`keygate, ${suffix}`];
      introspectionRows.push(
        {
          scenario: "introspection (RFC 7662), opaque token",
          server: peerName,
          load,
          result: theirs,
          rssMiB: peerRss,
        },
        {
          scenario: `introspection (RFC 7662), ${millionTokens}`,
          server: "keygate",
          load,
          result: ours,
          rssMiB: keygate.readRssMiB(),
          extra: { [RATIO_PEER]: formatRatio(ours, theirs) },
        },
      );
    }
    if (secureLua !== undefined) {
      introspectionRows.push({
        scenario: "secure GET, api_token in query (from the table above)",
        server: "keygate",
        load: luaLoad,
        result: secureLua,
        extra: { [RATIO_PEER]: formatRatio(secureLua, introspection["peer, lua"]) },
      });
    }
  }

  if (keygate !== undefined && wants("issuance")) {
    // --- Issuance against the hash limit, one core -----------------------------------------
    log("password-hash limit on one core");
    const hashRate1 = await hashRate(SERVER_CORE);
    for (const mode of ["issue-json", "issue-xml"]) {
      log(`keygate, token issuance (${mode}), one core`);
      await settle();
      const result = await measure(keygate, lua(keygate.origin, issuerPairs, mode), {
        connections: 4,
      });
      otherRows.push({
        scenario: `token issuance, ${mode === "issue-json" ? "JSON" : "XML"}, 1 core`,
        server: "keygate",
        load: "Lua, 4 connections",
        result,
        extra: {
          [NOTE]: `${(result.rps / hashRate1).toFixed(2)} of ${hashRate1.toFixed(0)} hashes/s`,
        },
      });
    }

    // --- Secure p99 while issuance is saturated, and during a login burst ----------------
    // p99 is a tail: one run can land on a stall of the machine. So: ROUNDS rounds, each
    // the same server unloaded, then with issuance saturated (started a second earlier and
    // running throughout), then with a burst of BURST_LOGINS logins held in the login queue
    // throughout (each answered login sent again at once): first from clients that honour
    // Retry-After, then from wrk, which sends a refused login again at once (the stress row).
    // The medians are compared.
    const unloaded: Measured[] = [];
    const loaded: Measured[] = [];
    const bursting: Measured[] = [];
    const burstLogins: WrkResult[] = [];
    const honouring: Measured[] = [];
    const honouringLogins: BurstResult[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      log(`keygate, secure p99 without and with saturated issuance, round ${round}/${ROUNDS}`);
      await settle();
      unloaded.push(await measure(keygate, lua(keygate.origin, bigPairs, "query")));
      const issuing = runWrk(lua(keygate.origin, issuerPairs, "issue-json"), {
        cores: WRK_CORE,
        threads: 1,
        connections: 4,
        duration: DURATION + 2,
      }, work);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      loaded.push(await measure(keygate, lua(keygate.origin, bigPairs, "query")));
      await issuing;
      await settle();
      // The row the target is judged on first, so that the stress run's leftovers cannot reach it.
      const politeBurst = runBurstProcess({
        origin: keygate.origin,
        caFile: `${work}/cert.pem`,
        pairsFile: issuerPairs,
        clients: BURST_LOGINS,
        seconds: DURATION + 2,
        cores: WRK_CORE,
      });
      await new Promise((resolve) => setTimeout(resolve, 1000));
      honouring.push(await measure(keygate, lua(keygate.origin, bigPairs, "query")));
      honouringLogins.push(await politeBurst);
      await settle();
      // Queued logins wait up to --login-queue-wait (5 s): wrk must not give up on them at 2 s.
      const burst = runWrk(lua(keygate.origin, issuerPairs, "issue-json"), {
        cores: WRK_CORE,
        threads: 1,
        connections: BURST_LOGINS,
        duration: DURATION + 2,
        timeoutSeconds: 30,
      }, work);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      bursting.push(await measure(keygate, lua(keygate.origin, bigPairs, "query")));
      burstLogins.push(await burst);
      // The logins the stress run left admitted are expected done within the bound (5 s).
      await new Promise((resolve) => setTimeout(resolve, 5000));
    }
    const byP99 = (runs: Measured[]) => [...runs].sort((a, b) => a.p99 - b.p99)[runs.length >> 1];
    const medianUnloaded = byP99(unloaded);
    const medianLoaded = byP99(loaded);
    const medianBursting = byP99(bursting);
    const medianHonouring = byP99(honouring);
    /** The issue's target for secure p99 under logins: at most 2× unloaded. */
    const verdict = (run: Measured) => {
      const ratio = run.p99 / medianUnloaded.p99;
      return `p99 ${ratio.toFixed(2)}× unloaded, target ≤ 2×: ${ratio <= 2 ? "met" : "missed"}`;
    };
    otherRows.push(
      {
        scenario: `secure GET, unloaded (median p99 of ${ROUNDS} rounds)`,
        server: "keygate",
        load: luaLoad,
        result: medianUnloaded,
      },
      {
        scenario: `secure GET while issuance is saturated (median p99 of ${ROUNDS} rounds)`,
        server: "keygate",
        load: luaLoad,
        result: medianLoaded,
        extra: {
          [NOTE]: `p99 ${(medianLoaded.p99 / medianUnloaded.p99).toFixed(2)}× unloaded` +
            "; server CPU includes the logins",
        },
      },
      {
        scenario: `secure GET during a burst of ${BURST_LOGINS} queued logins whose clients ` +
          `honour Retry-After (median p99 of ${ROUNDS} rounds)`,
        server: "keygate",
        load: luaLoad,
        result: medianHonouring,
        extra: { [NOTE]: `${verdict(medianHonouring)}; server CPU includes the logins` },
      },
      {
        scenario: `stress: secure GET during a burst of ${BURST_LOGINS} queued logins, each ` +
          `refused one sent again at once by wrk (median p99 of ${ROUNDS} rounds)`,
        server: "keygate",
        load: luaLoad,
        result: medianBursting,
        extra: { [NOTE]: `${verdict(medianBursting)}; server CPU includes the logins` },
      },
    );
    notes.push(
      `Logins from clients honouring Retry-After, by round: ${
        honouringLogins.map((run) =>
          `${run.ok} × 200, ${run.refused} × 503 (Retry-After ${
            run.retryAfter.length === 0 ? "none" : run.retryAfter.join("–")
          } s), ${run.failed} failed, p99 ${run.p99.toFixed(0)} ms`
        ).join("; ")
      }; the burst client's CPU ${
        honouringLogins.map((run) => `${Math.round(run.generatorShare * 100)}%`).join(", ")
      } of its core.`,
    );
    const refused = burstLogins.map((run) => `${run.requests - run.errors}/${run.requests}`);
    notes.push(
      `Logins during the stress burst, answered 200 of all answers by round: ${
        refused.join(", ")
      } (the rest 503 service_busy), p99 ${
        burstLogins.map((run) => run.p99.toFixed(0)).join(", ")
      } ms; wrk CPU ${
        burstLogins.map((run) => `${Math.round(run.generatorShare * 100)}%`).join(", ")
      }.`,
    );
    const p99s = (runs: Measured[]) => runs.map((run) => run.p99.toFixed(2)).join(", ");
    notes.push(
      `Secure p99 by round (ms): unloaded ${p99s(unloaded)}; with issuance saturated ${
        p99s(loaded)
      }; during the login burst honouring Retry-After ${p99s(honouring)}; during the stress burst ${
        p99s(bursting)
      }.`,
    );
  }
  await keygate?.stop();

  // --- Issuance on two cores ---------------------------------------------------------------
  if (wants("issuance")) {
    log("password-hash limit on two cores");
    const hashRate2 = await hashRate(TASKSET ? "0,1" : undefined);
    const keygate2 = await startKeygate(
      "keygate-2cores",
      `${work}/big.sqlite3`,
      TASKSET ? "0,1" : undefined,
    );
    log("keygate, token issuance (JSON), two cores");
    const issue2 = await measure(keygate2, lua(keygate2.origin, issuerPairs, "issue-json"), {
      connections: 8,
    });
    otherRows.push({
      scenario: "token issuance, JSON, 2 cores (wrk shares core 1)",
      server: "keygate",
      load: "Lua, 8 connections",
      result: issue2,
      extra: {
        [NOTE]: `${(issue2.rps / hashRate2).toFixed(2)} of ${hashRate2.toFixed(0)} hashes/s; ${
          (issue2.rps / otherRows[0].result.rps).toFixed(2)
        }× 1 core`,
      },
    });
    await keygate2.stop();
  }

  // --- Using every core: N listeners on one port ---------------------------------------
  if (wants("scaling")) {
    // Nothing pinned: the servers and wrk (two threads) share every core, as on a user's machine.
    // The bare server shows what reusePort gives on this machine, in threads and in processes;
    // keygate runs --workers 1 and --workers 2 (threads). Fixed URL, the load that reaches the
    // server's limit.
    const cores = navigator.hardwareConcurrency;
    const spread = { cores: undefined, threads: Math.min(2, cores) };
    const bareN = async (n: number, mode: string) =>
      await startServer(
        work,
        `bare-${n}-${mode}`,
        denoRun(
          ["--allow-net", "--allow-read", "--allow-run", "--unstable-net"],
          "./bench/bare_server.ts",
          [`${work}/cert.pem`, `${work}/key.pem`, String(n), mode],
        ),
        /listening (\d+)/,
      );
    const scaling: { name: string; server: Server; workers: number }[] = [
      { name: "bare, 1 listener", server: await bareN(1, "threads"), workers: 1 },
      { name: `bare, ${cores} threads`, server: await bareN(cores, "threads"), workers: cores },
      { name: `bare, ${cores} processes`, server: await bareN(cores, "processes"), workers: cores },
      {
        name: "keygate, --workers 1",
        server: await startKeygate("keygate-w1", `${work}/big.sqlite3`, undefined, [
          "--workers",
          "1",
        ]),
        workers: 1,
      },
      {
        name: `keygate, --workers ${cores}`,
        server: await startKeygate("keygate-wn", `${work}/big.sqlite3`, undefined, [
          "--workers",
          String(cores),
        ]),
        workers: cores,
      },
    ];
    log("warming up the workers");
    for (const { server } of scaling) {
      await measure(server, fixedQuery(server.origin), { ...spread, duration: 2 });
    }
    const scaled = await alternate(
      "every core",
      Object.fromEntries(
        scaling.map((
          { name, server },
        ) => [name, () => measure(server, fixedQuery(server.origin), spread)]),
      ),
    );
    for (const { name, server, workers } of scaling) {
      const one = name.startsWith("bare")
        ? scaled["bare, 1 listener"]
        : scaled["keygate, --workers 1"];
      const rss = server.readRssMiB();
      scalingRows.push({
        scenario: name.startsWith("bare")
          ? "secure GET (answers 3 bytes)"
          : `secure GET, ${millionTokens}`,
        server: name,
        load: `${fixedLoad}, wrk ${spread.threads} threads, nothing pinned`,
        result: scaled[name],
        rssMiB: rss,
        extra: {
          [RSS_PER_WORKER]: rss === undefined ? "" : (rss / workers).toFixed(1),
          [SCALING]: workers === 1 ? "(1 worker)" : formatRatio(scaled[name], one, "×"),
        },
      });
      await server.stop();
    }
  }

  // --- PostgreSQL beside SQLite (scripts/bench/postgres.ts) ----------------------------
  if (wants("postgres")) {
    postgresSection = await runPostgresSection({
      work,
      serverCore: SERVER_CORE,
      otherCore: WRK_CORE,
      sqlitePath: `${work}/big.sqlite3`,
      tokens: TOKENS,
      pairs: bigPairs,
      issuerPairs,
      sample: big.sample,
      cert,
      revocations: REVOCATIONS,
      measure,
      alternate,
      startKeygate: (name, store, cores, extra) => startKeygate(name, store, cores, extra),
      hashRate,
      settle,
      log,
      notes,
    });
  }

  for (const row of [...secureRows, ...introspectionRows, ...otherRows, ...scalingRows]) {
    const invalid = findInvalidRun(row.result);
    if (invalid !== undefined && row.result.errors > 0) {
      notes.push(`${row.scenario} (${row.server}, ${row.load}): ${row.result.errors} errors.`);
    }
  }
} finally {
  await Deno.remove(work, { recursive: true }).catch(() => {});
}

async function hashRate(cores: string | undefined): Promise<number> {
  const argv = pinTo(
    cores,
    denoRun(
      ["--allow-read", "--allow-env", "--allow-ffi", "--allow-sys"],
      "./bench/hash_rate.ts",
      [String(Math.min(DURATION, 5))],
    ),
  );
  const output = await new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped" }).output();
  return Number(/hashes_per_second ([\d.]+)/.exec(new TextDecoder().decode(output.stdout))?.[1]);
}

// --- Report ------------------------------------------------------------------------------
const cpu = (await Deno.readTextFile("/proc/cpuinfo").catch(() => "")).match(
  /model name\s*:\s*(.*)/,
)?.[1] ?? "unknown";
const wrkVersion = new TextDecoder().decode(
  (await new Deno.Command("wrk", { args: ["--version"], stdout: "piped", stderr: "piped" })
    .output()).stdout,
).split("\n")[0];
const command =
  `deno task bench --tokens ${TOKENS} --duration ${DURATION} --connections ${CONNECTIONS} --sample ${SAMPLE} --rounds ${ROUNDS}` +
  (REVOCATIONS === 200 ? "" : ` --revocations ${REVOCATIONS}`) +
  (PARTIAL ? ` --only ${[...ONLY].join(",")}` : "");
const results = wrapMarkdown(
  `Recorded by \`${command}\` on ${new Date().toISOString().slice(0, 10)}.

- Machine: ${navigator.hardwareConcurrency} cores (${cpu}), ${
    Math.round(Deno.systemMemoryInfo().total / 2 ** 30)
  } GiB; Deno ${Deno.version.deno}, V8 ${Deno.version.v8}; ${wrkVersion}
- Servers pinned to core 0${
    TASKSET ? "" : " (taskset missing: nothing pinned)"
  }, wrk (one thread) to core 1, except under "Using every core"; HTTPS, HTTP/1.1 keep-alive, ${CONNECTIONS} connections, ${DURATION} s per run; side-by-side rows are the median of ${ROUNDS} alternating rounds
- No ratio is printed where wrk was at ${
    Math.round(GENERATOR_LIMIT * 100)
  }% or more of its core (per wrk thread), or where a run had errors

${
    [
      wants("secure") &&
      `### Secure path against the ceiling\n\n${
        formatRows(secureRows, [RATIO_SAME, RATIO_CEILING, RATIO_CPU, RATIO_SHAPED])
      }`,
      wants("introspection") &&
      `### Introspection against the peer\n\n${formatRows(introspectionRows, [RATIO_PEER])}`,
      wants("issuance") && `### Issuance and tail latency\n\n${formatRows(otherRows, [NOTE])}`,
      wants("scaling") &&
      `### Using every core\n\n${formatRows(scalingRows, [RSS_PER_WORKER, SCALING])}`,
      postgresSection,
    ].filter((section) => typeof section === "string").join("\n\n")
  }

${notes.map((n) => `- ${n}`).join("\n")}
`,
);
console.log(results);
if (PARTIAL) {
  log(`--only ${[...ONLY].join(",")}: a partial run, printed only (never written)`);
} else if (!flags["no-write"]) {
  await writeResults(flags.output, results);
  log(`wrote ${flags.output}`);
}
