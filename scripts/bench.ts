/**
 * `deno task bench`: measures keygate against an honest ceiling and a peer,
 * side by side in one run, and writes the tables into docs/performance.md
 * (see its "Methodology" for what each column means). One module per section
 * under scripts/bench/, each a function of the shared context
 * (scripts/bench/context.ts) that returns its rows; scripts/bench/report.ts
 * writes them.
 *
 * - secure: a bare `Deno.serve` over HTTPS (the ceiling) and keygate's secure path, fixed URL and
 *   10,000+ distinct tokens by Lua; ratios both ways, wrk's own CPU share on every row, and no
 *   ratio with a run in which wrk was saturated (GENERATOR_LIMIT in scripts/bench/report.ts).
 * - introspection: oidc-provider answering RFC 7662 introspection, beside keygate's.
 * - issuance: issuance against the password-hash limit, secure p99 while issuance is saturated.
 * - scaling: the bare server with one listener per core (threads, then processes, sharing the
 *   port with reusePort) and keygate --workers 1 and N, with nothing pinned.
 * - postgres: PostgreSQL beside SQLite, on a throwaway cluster the bench starts.
 *
 * Servers are pinned to core 0 with `taskset` (when available) and wrk to core 1, except in the
 * scaling section.
 *
 * Usage: deno task bench [--tokens N] [--duration S] [--connections N] [--sample N]
 *                        [--rounds N] [--revocations N] [--only SECTIONS] [--output FILE]
 *                        [--no-write] [--baseline REV] [--mix-rates LIST]
 *                        [--mix-limit-rates LIST|none] [--mix-limit-headers on|off]
 *                        [--mix-control-rates LIST|none] [--mix-a-flags=FLAGS]
 *
 * `--baseline REV` checks out an earlier revision (scripts/bench/baseline.ts) and the sections
 * that compare with "before" run it too, in the same run: the PostgreSQL section's all-miss row.
 * `--mix-rates 0,1000` runs only those rows of the production mix, `--mix-limit-rates 10,100` its
 * rows with limits on every key at those rates (`none`: no such row), `--mix-limit-headers off`
 * with their `RateLimit` fields off, `--mix-control-rates 10` its control rows (the revocations on a
 * copy of the store, which A does not follow; default 10 and 100); `--mix-a-flags` adds Deno flags
 * to its instance A (`"--mix-a-flags=--cpu-prof --cpu-prof-dir=/tmp/prof"` profiles what following
 * the changes costs the instance that serves reads).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { resolveRevision } from "./bench/baseline.ts";
import { type BenchContext, createBenchContext, type SectionReport } from "./bench/context.ts";
import { runIntrospectionSection } from "./bench/introspection.ts";
import { runIssuanceSection } from "./bench/issuance.ts";
import { runPostgresSection } from "./bench/postgres.ts";
import { REVOCATION_RATES, runProductionMixSection } from "./bench/production_mix.ts";
import { runRateLimitsSection } from "./bench/rate_limits.ts";
import { formatReport, writeResults } from "./bench/report.ts";
import { runScalingSection } from "./bench/scaling.ts";
import { runSecureSection } from "./bench/secure.ts";

/** The sections, in the order they run; `--only` picks some by name. */
const SECTIONS: Record<string, (ctx: BenchContext) => Promise<SectionReport>> = {
  secure: runSecureSection,
  introspection: runIntrospectionSection,
  issuance: runIssuanceSection,
  scaling: runScalingSection,
  postgres: runPostgresSection,
  "production-mix": runProductionMixSection,
  "rate-limits": runRateLimitsSection,
};
const NAMES = Object.keys(SECTIONS);
const USAGE = "Usage: deno task bench [--tokens N] [--duration S] [--connections N] [--sample N] " +
  `[--rounds N] [--revocations N] [--only ${NAMES.join(",")}] [--output FILE] [--no-write] ` +
  "[--baseline REV] [--mix-rates 0,10,100,1000] [--mix-limit-rates 100|none] " +
  "[--mix-limit-headers on|off] [--mix-control-rates 10,100|none] " +
  "['--mix-a-flags=DENO FLAGS']";

const OPTIONS = {
  tokens: { type: "string", default: "1000000" },
  duration: { type: "string", default: "10" },
  connections: { type: "string", default: "50" },
  sample: { type: "string", default: "10000" },
  rounds: { type: "string", default: "3" },
  revocations: { type: "string", default: "200" },
  only: { type: "string", default: NAMES.join(",") },
  output: { type: "string", default: "docs/performance.md" },
  "no-write": { type: "boolean", default: false },
  baseline: { type: "string" },
  "mix-rates": { type: "string" },
  "mix-a-flags": { type: "string" },
  "mix-limit-rates": { type: "string" },
  "mix-limit-headers": { type: "string" },
  "mix-control-rates": { type: "string" },
  help: { type: "boolean", default: false },
} as const;

/** The flags; an unknown flag or a missing value is one line, exit 2. */
function readFlags() {
  try {
    return parseArgs({ args: Deno.args, options: OPTIONS }).values;
  } catch (error) {
    // Node's messages can run to several lines (the last one often the remedy): one line here.
    const message = (error instanceof Error ? error.message : String(error))
      .split("\n").map((line) => line.trim()).filter((line) => line !== "").join(" ");
    console.error(`bench: ${message} (deno task bench --help prints the usage)`);
    Deno.exit(2);
  }
}
const flags = readFlags();
if (flags.help) {
  console.log(USAGE);
  Deno.exit(0);
}
// Counts and seconds are positive whole numbers; anything else is one line, exit 2.
for (
  const name of ["tokens", "duration", "connections", "sample", "rounds", "revocations"] as const
) {
  if (!/^[1-9]\d*$/.test(flags[name])) {
    console.error(`bench: --${name}: "${flags[name]}": expected a positive whole number`);
    Deno.exit(2);
  }
}
const only = flags.only.split(",").map((name) => name.trim());
for (const name of only) {
  if (!NAMES.includes(name)) {
    console.error(`bench: --only: unknown section "${name}" (${NAMES.join(", ")})`);
    Deno.exit(2);
  }
}
/** A run of some sections or rows only, or with A profiled: printed, never written into the docs. */
const partial = NAMES.some((name) => !only.includes(name)) || flags["mix-rates"] !== undefined ||
  flags["mix-a-flags"] !== undefined || flags["mix-limit-rates"] !== undefined ||
  flags["mix-limit-headers"] !== undefined || flags["mix-control-rates"] !== undefined;
if (flags.baseline !== undefined && await resolveRevision(flags.baseline) === undefined) {
  console.error(`bench: --baseline: "${flags.baseline}" names no commit of this repository`);
  Deno.exit(2);
}

/**
 * The flag's list of distinct whole numbers of revocations/s (`none` for `--mix-limit-rates`: an
 * empty list), undefined when not given; a bad list is one line, exit 2.
 */
function readRatesFlag(
  flag: "mix-rates" | "mix-limit-rates" | "mix-control-rates",
): number[] | undefined {
  const value = flags[flag];
  if (value === undefined) return undefined;
  if (flag !== "mix-rates" && value.trim() === "none") return [];
  const rates = value.split(",").map((rate) => rate.trim());
  if (
    rates.some((rate) => !/^\d+$/.test(rate)) || new Set(rates.map(Number)).size !== rates.length
  ) {
    const like = flag === "mix-rates"
      ? `"0,1000"`
      : flag === "mix-limit-rates"
      ? `"0,100" or "none"`
      : `"10,100" or "none"`;
    console.error(
      `bench: --${flag}: "${value}": expected distinct whole numbers of revocations/s, ` +
        `like ${like}`,
    );
    Deno.exit(2);
  }
  return rates.map(Number);
}
const mixRates = readRatesFlag("mix-rates");
const mixLimitRates = readRatesFlag("mix-limit-rates");
const mixControlRates = readRatesFlag("mix-control-rates");
// A row with limits is compared with the same rate's row without, and a control row with the
// same rate's row whose changes A follows: that row must run (and a control row revokes).
const rowsRun = mixRates ?? REVOCATION_RATES;
const unpairedLimit = mixLimitRates?.find((rate) => !rowsRun.includes(rate));
const unpairedControl = mixControlRates?.find((rate) => rate === 0 || !rowsRun.includes(rate));
for (
  const [flag, unpaired, needs] of [
    ["mix-limit-rates", unpairedLimit, "a row with limits needs its row without"],
    ["mix-control-rates", unpairedControl, "a control row needs its row with A following"],
  ] as const
) {
  if (unpaired === undefined) continue;
  console.error(
    unpaired === 0 && flag === "mix-control-rates"
      ? "bench: --mix-control-rates: 0: a control row needs revocations to send elsewhere"
      : `bench: --${flag}: ${unpaired} is not among the production mix's rates ` +
        `(${rowsRun.join(",")}): ${needs}`,
  );
  Deno.exit(2);
}
const mixLimitHeaders = flags["mix-limit-headers"];
if (mixLimitHeaders !== undefined && mixLimitHeaders !== "on" && mixLimitHeaders !== "off") {
  console.error(`bench: --mix-limit-headers: "${mixLimitHeaders}": expected on or off`);
  Deno.exit(2);
}

// Flags first (a mistake is exit 2 wherever it is run), then what the run needs.
if (!(await commandExists("wrk"))) {
  console.error("bench: wrk is missing: install it with `apt-get install wrk` (Debian/Ubuntu)");
  Deno.exit(1);
}

const options = {
  tokens: Number(flags.tokens),
  duration: Number(flags.duration),
  connections: Number(flags.connections),
  sample: Number(flags.sample),
  rounds: Number(flags.rounds),
  revocations: Number(flags.revocations),
  taskset: await commandExists("taskset"),
  baselineRev: flags.baseline,
  mixRates,
  mixLimitRates,
  mixLimitHeaders: mixLimitHeaders === undefined ? undefined : mixLimitHeaders === "on",
  mixControlRates,
  mixADenoFlags: flags["mix-a-flags"]?.split(" ").filter((flag) => flag !== ""),
};
const ctx = await createBenchContext(options);
const reports: SectionReport[] = [];
try {
  for (const name of NAMES) if (only.includes(name)) reports.push(await SECTIONS[name](ctx));
} finally {
  await ctx.stopBigKeygate().catch(() => {});
  await ctx.baseline?.close();
  await Deno.remove(ctx.work, { recursive: true }).catch(() => {});
}

const command = `deno task bench --tokens ${options.tokens} --duration ${options.duration} ` +
  `--connections ${options.connections} --sample ${options.sample} --rounds ${options.rounds}` +
  (options.revocations === 200 ? "" : ` --revocations ${options.revocations}`) +
  (partial ? ` --only ${only.join(",")}` : "") +
  (options.baselineRev === undefined ? "" : ` --baseline ${options.baselineRev}`) +
  (mixRates === undefined ? "" : ` --mix-rates ${mixRates.join(",")}`) +
  (mixLimitRates === undefined
    ? ""
    : ` --mix-limit-rates ${mixLimitRates.length === 0 ? "none" : mixLimitRates.join(",")}`) +
  (mixLimitHeaders === undefined ? "" : ` --mix-limit-headers ${mixLimitHeaders}`) +
  (mixControlRates === undefined
    ? ""
    : ` --mix-control-rates ${mixControlRates.length === 0 ? "none" : mixControlRates.join(",")}`);
const results = await formatReport({ ...options, command }, reports, ctx.notes);
console.log(results);
if (partial) {
  console.error(`bench: --only ${only.join(",")}: a partial run, printed only (never written)`);
} else if (!flags["no-write"]) {
  await writeResults(flags.output, results);
  console.error(`bench: wrote ${flags.output}`);
}

async function commandExists(name: string): Promise<boolean> {
  try {
    await new Deno.Command(name, { args: ["--version"], stdout: "null", stderr: "null" }).output();
    return true;
  } catch {
    return false;
  }
}
