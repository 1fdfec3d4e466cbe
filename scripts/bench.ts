/**
 * `deno task bench`: measures keygate's secure path and token issuance
 * against a bare `Deno.serve` over HTTPS, side by side in one run, and writes
 * the results to docs/performance.md.
 *
 * Each server is pinned to core 0 with `taskset` (when available) and `wrk`
 * to core 1; HTTP/1.1 keep-alive; the same request shape for both servers.
 *
 * Usage: deno task bench [--tokens N] [--duration S] [--connections N] [--sample N]
 *                        [--output FILE] [--no-write]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { createPasswordHasher } from "../src/passwords/passwords.ts";
import { generateSelfSigned } from "../src/platform/tls.ts";
import { BENCH_PASSWORD, seedDatabase, type SeedEntry } from "./bench/seed.ts";

interface WrkResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  requests: number;
}

interface Row {
  scenario: string;
  server: string;
  result: WrkResult;
  rssMiB?: number;
  ratio?: string;
}

/** In the output file, everything after this line is replaced by each run. */
const GENERATED_MARKER =
  "<!-- Written by deno task bench from here on; edit only the text above. -->";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    tokens: { type: "string", default: "1000000" },
    duration: { type: "string", default: "10" },
    connections: { type: "string", default: "50" },
    sample: { type: "string", default: "10000" },
    output: { type: "string", default: "docs/performance.md" },
    "no-write": { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
});
if (flags.help) {
  console.log(
    "Usage: deno task bench [--tokens N] [--duration S] [--connections N] [--sample N] [--output FILE] [--no-write]",
  );
  Deno.exit(0);
}
const TOKENS = Number(flags.tokens);
const DURATION = Number(flags.duration);
const CONNECTIONS = Number(flags.connections);
const SAMPLE = Number(flags.sample);
/** Rounds of each side-by-side comparison (odd, for a median). */
const ROUNDS = 3;

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
const pin = (cores: string, argv: string[]) => TASKSET ? ["taskset", "-c", cores, ...argv] : argv;

const work = await Deno.makeTempDir({ prefix: "keygate-bench-" });
const { cert, key } = await generateSelfSigned();
await Deno.writeTextFile(`${work}/cert.pem`, cert);
await Deno.writeTextFile(`${work}/key.pem`, key);

function log(message: string) {
  console.error(`bench: ${message}`);
}

interface Server {
  origin: string;
  pid: number;
  stop(): Promise<void>;
}

/** Starts a server whose standard output goes to a file, and waits for its port. */
async function startServer(name: string, argv: string[], portPattern: RegExp): Promise<Server> {
  const logFile = `${work}/${name}.log`;
  const quoted = argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  const child = new Deno.Command("sh", {
    args: ["-c", `exec ${quoted} > '${logFile}' 2>&1`],
    stdin: "null",
  }).spawn();
  for (let i = 0; i < 600; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    let text = "";
    try {
      text = await Deno.readTextFile(logFile);
    } catch { /* not yet */ }
    const port = portPattern.exec(text)?.[1];
    if (port) {
      return {
        origin: `https://127.0.0.1:${port}`,
        pid: child.pid,
        async stop() {
          child.kill("SIGTERM");
          await child.status;
        },
      };
    }
  }
  child.kill("SIGKILL");
  throw new Error(`${name} did not start: ${await Deno.readTextFile(logFile).catch(() => "")}`);
}

/** Resident memory of a process in MiB: anonymous pages only (no mapped files). */
async function rssMiB(pid: number): Promise<number | undefined> {
  try {
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    const kb = Number(/RssAnon:\s+(\d+) kB/.exec(status)?.[1]);
    return Number.isFinite(kb) ? Math.round(kb / 102.4) / 10 : undefined;
  } catch {
    return undefined;
  }
}

function toMs(value: string, unit: string): number {
  const n = Number(value);
  return unit === "us" ? n / 1000 : unit === "s" ? n * 1000 : n;
}

async function wrk(
  origin: string,
  mode: string,
  pairsFile: string,
  options: { cores?: string; duration?: number; connections?: number } = {},
): Promise<WrkResult> {
  const argv = pin(options.cores ?? "1", [
    "wrk",
    "-t1",
    `-c${options.connections ?? CONNECTIONS}`,
    `-d${options.duration ?? DURATION}s`,
    "--latency",
    "-s",
    new URL("./bench/requests.lua", import.meta.url).pathname,
    origin,
    "--",
    pairsFile,
    mode,
  ]);
  const output = await new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped" }).output();
  const text = new TextDecoder().decode(output.stdout);
  const latency = (p: string) => {
    const match = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(text);
    return match ? toMs(match[1], match[2]) : NaN;
  };
  const number = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? NaN);
  return {
    // Successful (2xx) requests per second: wrk's own figure counts errors too.
    rps: (number(/(\d+) requests in/) - number(/errors\.status (\d+)/)) /
      number(/requests in ([\d.]+)s/),
    p50: latency("50"),
    p99: latency("99"),
    requests: number(/(\d+) requests in/),
    errors: number(/errors\.status (\d+)/) + number(/errors\.connect (\d+)/) +
      number(/errors\.timeout (\d+)/),
  };
}

async function writePairs(name: string, entries: SeedEntry[]): Promise<string> {
  const path = `${work}/${name}.pairs`;
  await Deno.writeTextFile(
    path,
    entries.map((e) => `${e.apiKey} ${e.token} ${e.email}`).join("\n") + "\n",
  );
  return path;
}

function keygateArgv(dbPath: string, cores: string): string[] {
  return pin(cores, [
    Deno.execPath(),
    "run",
    "--allow-net",
    "--allow-read",
    "--allow-write",
    "--allow-env",
    "--allow-ffi",
    "--allow-sys",
    new URL("../main.ts", import.meta.url).pathname,
    "--hostname",
    "127.0.0.1",
    "--port",
    "0",
    "--db",
    dbPath,
    "--cert",
    `${work}/cert.pem`,
    "--key",
    `${work}/key.pem`,
    "--log-level",
    "info",
  ]);
}

/**
 * A pause between runs: wrk stops with requests in flight, and the logins a worker already
 * holds for them still finish. Without it the next run starts against a busy pool.
 */
const settle = () => new Promise((resolve) => setTimeout(resolve, 1000));

const KEYGATE_PORT = /keygate listening on https:\/\/[^:]+:(\d+)\//;
const rows: Row[] = [];
const notes: string[] = [];

try {
  log("hashing the shared password");
  const passwordHash = await createPasswordHasher().hash(BENCH_PASSWORD);

  log(`seeding ${TOKENS.toLocaleString("en")} live tokens`);
  const big = await seedDatabase(`${work}/big.sqlite3`, {
    tokens: TOKENS,
    sample: SAMPLE,
    passwordHash,
  });
  const bigPairs = await writePairs("big", big.sample);
  const issuerPairs = await writePairs("issuers", big.issuers);
  const smallTokens = Math.min(1000, TOKENS);
  log(`seeding ${smallTokens} live tokens`);
  const small = await seedDatabase(`${work}/small.sqlite3`, {
    tokens: smallTokens,
    sample: smallTokens,
    passwordHash,
  });
  const smallPairs = await writePairs("small", small.sample);

  // --- The ceiling ---------------------------------------------------------
  const bare = await startServer(
    "bare",
    pin("0", [
      Deno.execPath(),
      "run",
      "--allow-net",
      "--allow-read",
      new URL("./bench/bare_server.ts", import.meta.url).pathname,
      `${work}/cert.pem`,
      `${work}/key.pem`,
    ]),
    /listening (\d+)/,
  );
  const ratio = (a: WrkResult, b: WrkResult) => (a.rps / b.rps).toFixed(2);

  // --- Secure path, 1,000,000 tokens, against the ceiling -------------------
  // The two servers take turns, ROUNDS times per request shape, so that a slow spell of the
  // machine falls on both alike; each row is the round with the median rate.
  let keygate = await startServer(
    "keygate-big",
    keygateArgv(`${work}/big.sqlite3`, "0"),
    KEYGATE_PORT,
  );
  const keygateSmall = await startServer(
    "keygate-small",
    keygateArgv(`${work}/small.sqlite3`, "0"),
    KEYGATE_PORT,
  );
  log("warming up the servers");
  await wrk(bare.origin, "query", bigPairs, { duration: 2 });
  await wrk(keygate.origin, "query", bigPairs, { duration: 2 });
  await wrk(keygateSmall.origin, "query", smallPairs, { duration: 2 });
  const smallRuns: WrkResult[] = [];
  const byRate = (runs: WrkResult[]) => [...runs].sort((a, b) => a.rps - b.rps)[runs.length >> 1];
  const sideBySide: Record<string, { bare: WrkResult; keygate: WrkResult }> = {};
  for (const shape of ["query", "bearer"]) {
    const bareRuns: WrkResult[] = [];
    const keygateRuns: WrkResult[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      log(`${shape} shape, round ${round}/${ROUNDS}: bare Deno.serve, then keygate`);
      bareRuns.push(await wrk(bare.origin, shape, bigPairs));
      keygateRuns.push(await wrk(keygate.origin, shape, bigPairs));
      if (shape === "query") {
        log(`query shape, round ${round}/${ROUNDS}: keygate with ${smallTokens} tokens`);
        smallRuns.push(await wrk(keygateSmall.origin, shape, smallPairs));
      }
    }
    sideBySide[shape] = { bare: byRate(bareRuns), keygate: byRate(keygateRuns) };
    notes.push(
      `${shape} shape, requests/s by round: bare ${
        bareRuns.map((r) => r.rps.toFixed(0)).join(", ")
      }; keygate ${keygateRuns.map((r) => r.rps.toFixed(0)).join(", ")}.`,
    );
  }
  const smallRss = await rssMiB(keygateSmall.pid);
  await keygateSmall.stop(); // idle from here on; stopped so that it cannot disturb what follows
  const bareQuery = sideBySide.query.bare;
  const bigQuery = sideBySide.query.keygate;
  const bigRss = await rssMiB(keygate.pid);
  rows.push({
    scenario: "secure, api_token in query",
    server: "bare Deno.serve",
    result: bareQuery,
    rssMiB: await rssMiB(bare.pid),
  });
  rows.push({
    scenario: "secure, Authorization: Bearer",
    server: "bare Deno.serve",
    result: sideBySide.bearer.bare,
  });
  await bare.stop();
  rows.push({
    scenario: `secure, api_token in query, ${TOKENS.toLocaleString("en")} tokens`,
    server: "keygate",
    result: bigQuery,
    rssMiB: bigRss,
    ratio: ratio(bigQuery, bareQuery),
  });
  rows.push({
    scenario: `secure, Authorization: Bearer, ${TOKENS.toLocaleString("en")} tokens`,
    server: "keygate",
    result: sideBySide.bearer.keygate,
    rssMiB: await rssMiB(keygate.pid),
    ratio: ratio(sideBySide.bearer.keygate, sideBySide.bearer.bare),
  });

  // --- Issuance against the hash limit, one core ---------------------------
  log("password-hash limit on one core");
  const hashRate1 = await hashRate("0");
  log("keygate, token issuance (JSON), one core");
  const issueJson = await wrk(keygate.origin, "issue-json", issuerPairs, { connections: 4 });
  rows.push({
    scenario: "token issuance, JSON, 1 core",
    server: "keygate",
    result: issueJson,
    ratio: `${(issueJson.rps / hashRate1).toFixed(2)} of ${hashRate1.toFixed(0)} hashes/s`,
  });
  log("keygate, token issuance (XML), one core");
  await settle();
  const issueXml = await wrk(keygate.origin, "issue-xml", issuerPairs, { connections: 4 });
  rows.push({
    scenario: "token issuance, XML, 1 core",
    server: "keygate",
    result: issueXml,
    ratio: `${(issueXml.rps / hashRate1).toFixed(2)} of ${hashRate1.toFixed(0)} hashes/s`,
  });

  // --- Secure p99 while issuance is saturated ------------------------------
  // p99 is a tail: one run can land on a stall of the machine. So: ROUNDS rounds, each
  // the same server unloaded and then with issuance saturated (started a second earlier and
  // running throughout), and the medians compared.
  const unloaded: WrkResult[] = [];
  const loaded: WrkResult[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    log(`keygate, secure p99 without and with saturated issuance, round ${round}/${ROUNDS}`);
    await settle();
    unloaded.push(await wrk(keygate.origin, "query", bigPairs));
    const issuing = wrk(keygate.origin, "issue-json", issuerPairs, {
      connections: 4,
      duration: DURATION + 2,
    });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    loaded.push(await wrk(keygate.origin, "query", bigPairs));
    await issuing;
  }
  const byP99 = (runs: WrkResult[]) => [...runs].sort((a, b) => a.p99 - b.p99);
  const medianUnloaded = byP99(unloaded)[ROUNDS >> 1];
  const medianLoaded = byP99(loaded)[ROUNDS >> 1];
  rows.push({
    scenario: `secure, unloaded (median p99 of ${ROUNDS} rounds)`,
    server: "keygate",
    result: medianUnloaded,
  });
  rows.push({
    scenario: `secure while issuance is saturated (median p99 of ${ROUNDS} rounds)`,
    server: "keygate",
    result: medianLoaded,
    ratio: `p99 ${(medianLoaded.p99 / medianUnloaded.p99).toFixed(2)}× unloaded`,
  });
  const p99s = (runs: WrkResult[]) => runs.map((run) => run.p99.toFixed(2)).join(", ");
  notes.push(
    `Secure p99 by round (ms): unloaded ${p99s(unloaded)}; with issuance saturated ${
      p99s(loaded)
    }.`,
  );
  await keygate.stop();

  // --- Secure path, 1,000 tokens (measured in the rounds above) -----------
  const smallQuery = byRate(smallRuns);
  rows.push({
    scenario: `secure, api_token in query, ${smallTokens.toLocaleString("en")} tokens`,
    server: "keygate",
    result: smallQuery,
    rssMiB: smallRss,
    ratio: ratio(smallQuery, bareQuery),
  });
  notes.push(
    `keygate with ${smallTokens.toLocaleString("en")} tokens, requests/s by round: ${
      smallRuns.map((r) => r.rps.toFixed(0)).join(", ")
    }.`,
    `With ${TOKENS.toLocaleString("en")} tokens the secure path runs at ` +
      `${(bigQuery.rps / smallQuery.rps * 100).toFixed(0)}% of its rate with ${
        smallTokens.toLocaleString("en")
      } (medians).`,
  );

  // --- Issuance on two cores -----------------------------------------------
  log("password-hash limit on two cores");
  const hashRate2 = await hashRate("0,1");
  keygate = await startServer(
    "keygate-2cores",
    keygateArgv(`${work}/big.sqlite3`, "0,1"),
    KEYGATE_PORT,
  );
  log("keygate, token issuance (JSON), two cores");
  const issue2 = await wrk(keygate.origin, "issue-json", issuerPairs, { connections: 8 });
  rows.push({
    scenario: "token issuance, JSON, 2 cores (wrk shares core 1)",
    server: "keygate",
    result: issue2,
    ratio: `${(issue2.rps / hashRate2).toFixed(2)} of ${hashRate2.toFixed(0)} hashes/s; ${
      (issue2.rps / issueJson.rps).toFixed(2)
    }× 1 core`,
  });
  await keygate.stop();

  for (const row of rows) {
    if (row.result.errors > 0) {
      notes.push(`${row.scenario} (${row.server}): ${row.result.errors} non-2xx or socket errors.`);
    }
  }
} finally {
  await Deno.remove(work, { recursive: true }).catch(() => {});
}

async function hashRate(cores: string): Promise<number> {
  const argv = pin(cores, [
    Deno.execPath(),
    "run",
    "--allow-read",
    "--allow-env",
    "--allow-ffi",
    "--allow-sys",
    new URL("./bench/hash_rate.ts", import.meta.url).pathname,
    String(Math.min(DURATION, 5)),
  ]);
  const output = await new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped" }).output();
  return Number(/hashes_per_second ([\d.]+)/.exec(new TextDecoder().decode(output.stdout))?.[1]);
}

// --- Report ------------------------------------------------------------------
const header = "| scenario | server | req/s | p50 ms | p99 ms | RSS MiB | keygate/bare |";
const table = [
  header,
  "| --- | --- | ---: | ---: | ---: | ---: | --- |",
  ...rows.map((r) =>
    `| ${r.scenario} | ${r.server} | ${r.result.rps.toFixed(0)} | ${r.result.p50.toFixed(2)} | ${
      r.result.p99.toFixed(2)
    } | ${r.rssMiB ?? ""} | ${r.ratio ?? ""} |`
  ),
].join("\n");
console.log(table);
for (const note of notes) console.log(`- ${note}`);

if (!flags["no-write"]) {
  const cpu = (await Deno.readTextFile("/proc/cpuinfo").catch(() =>
    ""
  )).match(/model name\s*:\s*(.*)/)
    ?.[1] ?? "unknown";
  const wrkVersion = new TextDecoder().decode(
    (await new Deno.Command("wrk", { args: ["--version"], stdout: "piped", stderr: "piped" })
      .output())
      .stdout,
  ).split("\n")[0];
  const markdown = `# Performance

Recorded by \`deno task bench\` on ${
    new Date().toISOString().slice(0, 10)
  }. Regenerate with the same
command (it needs \`wrk\`: \`apt-get install wrk\`).

- Machine: ${navigator.hardwareConcurrency} cores (${cpu}), ${
    Math.round(Deno.systemMemoryInfo().total / 2 ** 30)
  } GiB
- Deno ${Deno.version.deno}, V8 ${Deno.version.v8}; ${wrkVersion}
- Servers pinned to core 0${
    TASKSET ? "" : " (taskset missing: not pinned)"
  }, wrk to core 1; HTTPS, HTTP/1.1
  keep-alive, ${CONNECTIONS} connections (4 per core for issuance, so the hash queue never overflows), ${DURATION} s per run after a 2 s warm-up
- keygate against the bare server, and keygate's p99 without and with saturated issuance, are
  compared over ${ROUNDS} alternating rounds; each row is the median round (all rounds in the notes)
- Secure requests cycle through ${SAMPLE.toLocaleString("en")} distinct tokens; the database holds
  ${TOKENS.toLocaleString("en")} live tokens (or 1,000 where the row says so); keygate logs every
  request (JSON line to a file)
- Command: \`deno task bench --tokens ${TOKENS} --duration ${DURATION} --connections ${CONNECTIONS}\`

${table}

${notes.map((n) => `- ${n}`).join("\n")}
`;
  // The prose above the marker (how to read and reproduce the numbers) is kept.
  let existing = "";
  try {
    existing = await Deno.readTextFile(flags.output);
  } catch {
    existing = "";
  }
  const at = existing.indexOf(GENERATED_MARKER);
  const written = at === -1
    ? markdown
    : `${existing.slice(0, at + GENERATED_MARKER.length)}\n\n${
      markdown.replace(/^# Performance\n/, "## Measurements\n")
    }`;
  await Deno.writeTextFile(flags.output, written);
  log(`wrote ${flags.output}`);
}
