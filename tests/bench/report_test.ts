/**
 * The bench's arithmetic and judgements, which decide what docs/performance.md records: a ratio
 * is printed only when neither run saturated wrk or had errors (report.ts), CPU ratios, the
 * nearest-rank percentile and the revocation target's verdict (revocation.ts), the median run and
 * the production mix's rows with limits (mix_row.ts), the change-delay histogram's percentiles
 * (mix_probes.ts), the victims' split between the pairs (mix_pairs.ts) and the docs' wrapping.
 * Pure functions on made-up runs: no server, no wrk.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  formatCpuRatio,
  formatRatio,
  type Measured,
  wrapMarkdown,
} from "../../scripts/bench/report.ts";
import { formatRevocations, percentile } from "../../scripts/bench/revocation.ts";
import { medianRun, type RateRun, toRow } from "../../scripts/bench/mix_row.ts";
import { formatLearned } from "../../scripts/bench/mix_probes.ts";
import { splitVictims } from "../../scripts/bench/mix_pairs.ts";
import type { Revocation, Victim } from "../../scripts/bench/mix_traffic.ts";
import { waitForQuiet } from "../../scripts/bench/proc.ts";

/** A valid run: `rps` requests a second, wrk at half its core, no errors. */
function measured(rps: number, overrides: Partial<Measured> = {}): Measured {
  return {
    rps,
    p50: 1,
    p99: 4,
    requests: rps * 10,
    errors: 0,
    seconds: 10,
    generatorShare: 0.5,
    cpuUsPerRequest: 1e6 / rps,
    serverCores: 1,
    ...overrides,
  };
}

Deno.test("formatRatio: two decimals of a over b when both runs are valid", () => {
  assert.equal(formatRatio(measured(9_000), measured(10_000)), "0.90");
  assert.equal(formatRatio(measured(30_000), measured(10_000), "×"), "3.00×");
});

Deno.test("formatRatio: no ratio where wrk reached 90% of its core, on either side", () => {
  const saturated = measured(50_000, { generatorShare: 0.9 });
  assert.equal(formatRatio(saturated, measured(10_000)), "no ratio: wrk at 90% of its core");
  assert.equal(formatRatio(measured(10_000), saturated), "no ratio: wrk at 90% of its core");
  // Just under the limit still counts.
  assert.equal(formatRatio(measured(9_000, { generatorShare: 0.89 }), measured(10_000)), "0.90");
  // A share that could not be read is no evidence that wrk had room.
  assert.match(formatRatio(measured(1, { generatorShare: NaN }), measured(1)), /^no ratio: wrk/);
});

Deno.test("formatRatio and formatCpuRatio: no ratio with errors", () => {
  const failed = measured(10_000, { errors: 3 });
  assert.equal(formatRatio(failed, measured(10_000)), "no ratio: 3 errors");
  assert.equal(formatCpuRatio(measured(10_000), failed), "no ratio: errors");
});

Deno.test("formatCpuRatio: base's CPU per request over the run's, whatever wrk's share", () => {
  const base = measured(40_000, { cpuUsPerRequest: 25 });
  const run = measured(20_000, { cpuUsPerRequest: 50, generatorShare: 0.95 });
  assert.equal(formatCpuRatio(base, run), "0.50");
});

Deno.test("percentile: nearest rank, whatever the order given", () => {
  const values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
  assert.equal(percentile(values, 50), 5);
  assert.equal(percentile(values, 99), 10);
  assert.equal(percentile(values, 0), 1);
  assert.equal(percentile([42], 99), 42);
  // 200 samples (as the revocation probe takes): p99 is the 198th smallest, not the largest.
  const many = Array.from({ length: 200 }, (_, i) => 200 - i);
  assert.equal(percentile(many, 99), 198);
  assert.equal(percentile(many, 50), 100);
  assert.deepEqual(values.slice(0, 3), [5, 1, 4], "the input is left unsorted");
});

Deno.test("formatRevocations: the target is judged on p99, met at the bound and missed past it", () => {
  const roundTrips = [0.5, 0.5];
  const at = formatRevocations({ latencies: [1, 2, 10], roundTrips }, 10);
  assert.match(at, /^3 revocations: p50 2\.00 ms, \*\*p99 10\.00 ms\*\*, max 10\.00 ms/);
  assert.match(at, /\(target p99 ≤ 10 ms: met\)/);
  assert.match(at, /2 polls answered 200$/);
  const past = formatRevocations({ latencies: [1, 2, 10.01], roundTrips }, 10);
  assert.match(past, /\(target p99 ≤ 10 ms: missed\)/);
});

/** A production-mix run of `rps`, with no revocations and no probes unless given. */
function rateRun(rps: number, overrides: Partial<RateRun> = {}): RateRun {
  return {
    result: measured(rps),
    hits: 90,
    lookups: 100,
    revoked: {
      done: 0,
      kinds: { token: 0, rotate: 0, user: 0 },
      failed: 0,
      failures: {},
      ranOut: false,
      seconds: 10,
      answerMs: 0,
      unsent: 0,
    },
    delays: [],
    logged: "20 tokens",
    bCpu: 1,
    generatorCpu: 1,
    notified: NaN,
    polls: 0,
    rowsRead: 0,
    listening: undefined,
    learned: { before: new Map(), after: new Map() },
    leases: { calls: 0, keys: 0, waits: 0 },
    ...overrides,
  };
}

Deno.test("medianRun: the run with the median rate, not the middle of the order given", () => {
  const runs = [rateRun(30_000), rateRun(10_000), rateRun(20_000)];
  assert.equal(medianRun(runs), runs[2]);
  assert.equal(runs[0].result.rps, 30_000, "the runs are left in their order");
});

Deno.test("toRow: a row with limits gives its rate as a share of the same rate's row without", () => {
  // The base (no revocations, no limits) and the same rate's row without limits differ, and each
  // ratio's CPU side differs from its rate side: a swapped argument shows.
  const base = rateRun(25_000, { result: measured(25_000, { cpuUsPerRequest: 40 }) });
  const without = rateRun(20_000, { result: measured(20_000, { p99: 4, cpuUsPerRequest: 55 }) });
  const leases = { calls: 4, keys: 10, waits: 2 };
  const limited = [18_000, 14_000, 16_000].map((rps) =>
    rateRun(rps, {
      result: measured(rps, { p99: 4.25, requests: 20_000, cpuUsPerRequest: 62.5 }),
      leases,
    })
  );
  const row = toRow({ duration: 10 }, {
    backend: "SQLite",
    rate: 100,
    runs: limited,
    base,
    limited: true,
    without,
  });
  assert.equal(
    row.scenario,
    "production mix, 100 revocations/s of other grants through B, a rate and a quota on " +
      "every key (the median of 3 rounds)",
  );
  assert.equal(row.result.rps, 16_000);
  assert.equal(row.extra?.["of the no-revocation rate"], "0.64 (of the medians)");
  assert.match(row.extra?.["A's capacity, by CPU per request"] ?? "", /^0\.64 of the base; /);
  assert.equal(
    row.extra?.["with limits, of the same rate without"],
    "**0.80** (of the medians); A's capacity, by CPU per request: 0.88 of it; p99 0.25 ms " +
      "worse; A's leases per 1,000 requests: 0.2 calls, 0.5 keys, 0.1 requests waited",
  );
  assert.equal(row.extra?.["hit ratio"], "90.0%");
});

Deno.test("toRow: no ratio with limits where either side's victims ran out", () => {
  const ranOut = { ...rateRun(0).revoked, ranOut: true };
  const without = rateRun(20_000, { revoked: ranOut });
  const row = toRow({ duration: 10 }, {
    backend: "PostgreSQL",
    rate: 100,
    runs: [rateRun(19_000)],
    base: without,
    limited: true,
    without,
    fieldsOff: true,
  });
  assert.match(row.scenario, /, --limit-headers off$/);
  assert.match(
    row.extra?.["with limits, of the same rate without"] ?? "",
    /^no ratio: the victims ran out; /,
  );
});

Deno.test("toRow: a row A follows, beside its control row, gives the share of the control", () => {
  // The control row and the base differ, and each side's CPU differs from its rate: a swapped
  // argument shows.
  const base = rateRun(25_000, { result: measured(25_000, { cpuUsPerRequest: 40 }) });
  const elsewhere = rateRun(24_000, { result: measured(24_000, { cpuUsPerRequest: 41 }) });
  const followed = [22_000, 21_600, 23_000].map((rps) =>
    rateRun(rps, { result: measured(rps, { cpuUsPerRequest: 45.1 }) })
  );
  const followedBeside = (control: RateRun) =>
    toRow({ duration: 10 }, {
      backend: "SQLite",
      rate: 10,
      runs: followed,
      base,
      limited: false,
      without: undefined,
      elsewhere: control,
    });
  const row = followedBeside(elsewhere);
  assert.equal(row.result.rps, 22_000);
  assert.equal(row.extra?.["of the no-revocation rate"], "0.88 (of the medians)");
  assert.equal(
    row.extra?.["following the changes, of the same rate elsewhere"],
    "**0.92** (of the medians); A's capacity, by CPU per request: 0.91 of it",
  );
  // The control row names itself and gives its own share of the base, with no following column.
  const control = toRow({ duration: 10 }, {
    backend: "SQLite",
    rate: 10,
    runs: [elsewhere],
    base,
    limited: false,
    control: true,
    without: undefined,
  });
  assert.equal(
    control.scenario,
    "production mix, 10 revocations/s of other grants through B, control: through another " +
      "pair's B on a copy of the store, which A does not follow (the probe is on that pair's A)",
  );
  assert.equal(control.extra?.["of the no-revocation rate"], "0.96");
  assert.equal(control.extra?.["following the changes, of the same rate elsewhere"], "");
  // No ratio where either side's victims ran out.
  const ranOut = { ...rateRun(0).revoked, ranOut: true };
  const dry = followedBeside(rateRun(24_000, { revoked: ranOut }));
  assert.match(
    dry.extra?.["following the changes, of the same rate elsewhere"] ?? "",
    /^no ratio: the victims ran out; /,
  );
});

Deno.test("toRow: the base row and a row without limits say so, with no limits column", () => {
  const base = rateRun(20_000);
  const row = toRow({ duration: 10 }, {
    backend: "SQLite",
    rate: 0,
    runs: [base],
    base,
    limited: false,
    without: undefined,
  });
  assert.equal(row.scenario, "production mix, 0 revocations/s of other grants through B");
  assert.equal(row.extra?.["of the no-revocation rate"], "(the base)");
  assert.equal(row.extra?.["with limits, of the same rate without"], "");
});

Deno.test("formatLearned: the histogram's percentiles over the run's changes only", () => {
  // Cumulative counts by upper bound (seconds), before and after the run; A's histogram ends at
  // 2.5 s.
  const before = new Map([[0.001, 10], [0.01, 10], [2.5, 10], [Infinity, 10]]);
  const after = new Map([[0.001, 60], [0.01, 109], [2.5, 110], [Infinity, 110]]);
  assert.equal(
    formatLearned(before, after),
    "; commit to learned on A (its /metrics, 100 changes): p50 ≤ 1 ms, p99 ≤ 10 ms",
  );
  // Past the last finite bound.
  const late = new Map([[0.001, 10], [0.01, 20], [2.5, 30], [Infinity, 110]]);
  assert.match(formatLearned(before, late), /p50 > 2\.5 s, p99 > 2\.5 s$/);
  // No change in the run: nothing to say.
  assert.equal(formatLearned(before, before), "");
});

/** `count` victims of one token each. */
function victims(count: number): Victim[] {
  return Array.from({ length: count }, (_, i) => ({
    apiKey: `key-${i}`,
    tokens: [`token-${i}`],
    userId: i,
    keyId: i,
  }));
}

const names = (list: Iterable<Revocation>) => [...new Set([...list].map((r) => r.victim.apiKey))];

Deno.test("splitVictims: disjoint, complete, and in proportion to the rates asked", () => {
  const all = victims(1_000);
  // The pair without limits runs 0, 10 and 100 a second; the pair with, 100 only: 110 to 100.
  const split = splitVictims(all, { plain: [0, 10, 100], limited: [100] });
  const plain = names(split.plain.revocations);
  const limited = names(split.limited.revocations);
  const probes = [...split.plain.probes, ...split.limited.probes].map((p) => p.apiKey);
  const used = [...plain, ...limited, ...probes];
  assert.equal(new Set(used).size, used.length, "no victim goes to two uses");
  assert.equal(used.length, all.length, "every victim is used");
  // Every tenth for the probes, alternately to each pair.
  assert.equal(split.plain.probes.length, 50);
  assert.equal(split.limited.probes.length, 50);
  assert.deepEqual(split.plain.probes.slice(0, 2).map((p) => p.apiKey), ["key-0", "key-20"]);
  assert.deepEqual(split.limited.probes.slice(0, 2).map((p) => p.apiKey), ["key-10", "key-30"]);
  // 900 others in proportion 110 : 100 (to within one).
  assert.ok(Math.abs(limited.length - 900 * 100 / 210) <= 1, `${limited.length} limited`);
  assert.equal(plain.length, 900 - limited.length);
});

Deno.test("splitVictims: three pairs, each in proportion at every prefix of the list", () => {
  const all = victims(2_000);
  const rates = { plain: [0, 10, 100], control: [10, 100], limited: [100] };
  const split = splitVictims(all, rates);
  const owner = new Map<string, string>();
  const give = (key: string, use: string) => {
    assert.equal(owner.get(key), undefined, `${key} given to ${owner.get(key)} and ${use}`);
    owner.set(key, use);
  };
  for (const [pair, traffic] of Object.entries(split)) {
    for (const key of names(traffic.revocations)) give(key, pair);
    for (const probe of traffic.probes) give(probe.apiKey, `${pair}'s probe`);
  }
  assert.equal(owner.size, all.length, "every victim is used");
  // The probes go to each pair in turn: every tenth victim, the first to plain.
  assert.deepEqual(split.plain.probes.slice(0, 2).map((p) => p.apiKey), ["key-0", "key-30"]);
  assert.deepEqual(split.control.probes.slice(0, 2).map((p) => p.apiKey), ["key-10", "key-40"]);
  assert.deepEqual(split.limited.probes.slice(0, 2).map((p) => p.apiKey), ["key-20", "key-50"]);
  // The 1,800 others in proportion 110 : 110 : 100, and spread: after every prefix of the list,
  // each pair holds its share of it to within one.
  const others = all.filter((_, i) => i % 10 !== 0).map((v) => v.apiKey);
  const shares = { plain: 110 / 320, control: 110 / 320, limited: 100 / 320 };
  const held = { plain: 0, control: 0, limited: 0 };
  others.forEach((key, i) => {
    const pair = owner.get(key) as keyof typeof held;
    assert.ok(pair in held, `${key}: ${pair}`);
    held[pair]++;
    for (const [name, share] of Object.entries(shares)) {
      const count = held[name as keyof typeof held];
      assert.ok(Math.abs(count - (i + 1) * share) <= 1, `${name}: ${count} of the first ${i + 1}`);
    }
  });
});

Deno.test("splitVictims: a pair with no rates gets no victims to revoke, nor probes", () => {
  const split = splitVictims(victims(100), { plain: [0, 100], limited: [] });
  assert.equal(names(split.limited.revocations).length, 0);
  assert.equal(names(split.plain.revocations).length, 90);
  assert.equal(split.limited.probes.length, 0);
  assert.equal(split.plain.probes.length, 10);
  // The pair without rates in the middle, as the section passes them.
  const middle = splitVictims(victims(100), { plain: [0, 10], limited: [], control: [10] });
  assert.equal(names(middle.limited.revocations).length, 0);
  assert.equal(middle.limited.probes.length, 0);
  assert.equal(names(middle.plain.revocations).length, 45);
  assert.equal(names(middle.control.revocations).length, 45);
  assert.deepEqual(middle.plain.probes.map((p) => p.apiKey), [
    "key-0",
    "key-20",
    "key-40",
    "key-60",
    "key-80",
  ]);
  assert.deepEqual(middle.control.probes.map((p) => p.apiKey), [
    "key-10",
    "key-30",
    "key-50",
    "key-70",
    "key-90",
  ]);
  // Only rows without revocations: the first pair still gets the probes (for the idle delays).
  const idle = splitVictims(victims(100), { plain: [0], control: [] });
  assert.equal(idle.plain.probes.length, 10);
  assert.equal(names(idle.plain.revocations).length + names(idle.control.revocations).length, 0);
});

Deno.test("wrapMarkdown: list items wrap under their text; headings and tables stay whole", () => {
  const item = "- " + "word ".repeat(30).trim();
  const wrapped = wrapMarkdown(item, 40).split("\n");
  assert.ok(wrapped.every((line) => line.length <= 40), wrapped.join("\n"));
  assert.ok(wrapped[0].startsWith("- word"));
  assert.ok(wrapped.slice(1).every((line) => line.startsWith("  word")));
  assert.equal(wrapped.join(" ").replace(/\s+/g, " "), item);
  const table = "| " + "cell | ".repeat(20);
  const heading = "### " + "title ".repeat(20);
  assert.equal(wrapMarkdown(`${table}\n${heading}`, 40), `${table}\n${heading}`);
});

/** Machine ticks that advance by 100 a second, `busy` of them busy in each second in turn. */
function ticks(busyBySecond: number[]) {
  let second = 0;
  let busy = 0;
  return {
    readTicks: () => ({ busy, total: second * 100 }),
    sleepSecond: () => {
      busy += busyBySecond[Math.min(second, busyBySecond.length - 1)];
      second++;
      return Promise.resolve();
    },
  };
}

Deno.test("waitForQuiet: returns after the first second under the threshold", async () => {
  const wait = await waitForQuiet({ ...ticks([60, 35, 9, 80]), threshold: 0.1 });
  assert.deepEqual(wait, { seconds: 3, quiet: true, busy: 0.09 });
});

Deno.test("waitForQuiet: a machine busy throughout is measured anyway after the timeout", async () => {
  const wait = await waitForQuiet({ ...ticks([50]), threshold: 0.1, timeoutSeconds: 5 });
  assert.deepEqual(wait, { seconds: 5, quiet: false, busy: 0.5 });
});
