/**
 * The bench's "Issuance and tail latency" section: token issuance against the
 * measured password-hash limit on one core, secure p99 unloaded, with
 * issuance saturated and during a burst of queued logins, and issuance on two
 * cores.
 *
 * @module
 */
import type { BenchContext, SectionReport } from "./context.ts";
import type { Measured, Row } from "./report.ts";
import type { Server } from "./servers.ts";
import { runWrk, type WrkResult } from "./wrk.ts";

const NOTE = "note";
/**
 * Logins held in the queue in the burst row (each answered one sent again at once, so the queue
 * stays this deep for the whole run): the issue's 100, × 16 ms on one core is 1.6 s, within the
 * default --login-queue-wait, so that the row measures a deep queue rather than a storm of
 * refused logins sent again at once (docs/performance.md, "Login bursts").
 */
const BURST_LOGINS = 100;

/** Runs the section; stops the shared keygate of the big database before the two-core run. */
export async function runIssuanceSection(ctx: BenchContext): Promise<SectionReport> {
  const keygate = await ctx.bigKeygate();
  const rows = await measureOneCore(ctx, keygate);
  rows.push(...await measureTail(ctx, keygate));
  await ctx.stopBigKeygate();
  rows.push(await measureTwoCores(ctx, rows[0].result));
  return { title: "Issuance and tail latency", rows, columns: [NOTE] };
}

async function measureOneCore(ctx: BenchContext, keygate: Server): Promise<Row[]> {
  ctx.log("password-hash limit on one core");
  const hashRate1 = await ctx.hashRate(ctx.serverCore);
  const rows: Row[] = [];
  for (const mode of ["issue-json", "issue-xml"]) {
    ctx.log(`keygate, token issuance (${mode}), one core`);
    await ctx.settle();
    const result = await ctx.measure(keygate, ctx.lua(keygate.origin, ctx.issuerPairs, mode), {
      connections: 4,
    });
    rows.push({
      scenario: `token issuance, ${mode === "issue-json" ? "JSON" : "XML"}, 1 core`,
      server: "keygate",
      load: "Lua, 4 connections",
      result,
      extra: {
        [NOTE]: `${(result.rps / hashRate1).toFixed(2)} of ${hashRate1.toFixed(0)} hashes/s`,
      },
    });
  }
  return rows;
}

/**
 * p99 is a tail: one run can land on a stall of the machine. So: ROUNDS rounds, each the same
 * server unloaded, then with issuance saturated (started a second earlier and running
 * throughout), then with a burst of BURST_LOGINS logins held in the login queue throughout
 * (each answered login sent again at once), and the medians compared.
 */
async function measureTail(ctx: BenchContext, keygate: Server): Promise<Row[]> {
  const secureLoad = ctx.lua(keygate.origin, ctx.pairs, "query");
  const logins = ctx.lua(keygate.origin, ctx.issuerPairs, "issue-json");
  const wrk = { cores: ctx.otherCore, threads: 1, duration: ctx.duration + 2 };
  const unloaded: Measured[] = [];
  const loaded: Measured[] = [];
  const bursting: Measured[] = [];
  const burstLogins: WrkResult[] = [];
  for (let round = 1; round <= ctx.rounds; round++) {
    ctx.log(
      `keygate, secure p99 without and with saturated issuance, round ${round}/${ctx.rounds}`,
    );
    await ctx.settle();
    unloaded.push(await ctx.measure(keygate, secureLoad));
    const issuing = runWrk(logins, { ...wrk, connections: 4 }, ctx.work);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    loaded.push(await ctx.measure(keygate, secureLoad));
    await issuing;
    await ctx.settle();
    // Queued logins wait up to --login-queue-wait (5 s): wrk must not give up on them at 2 s.
    const burst = runWrk(
      logins,
      { ...wrk, connections: BURST_LOGINS, timeoutSeconds: 30 },
      ctx.work,
    );
    await new Promise((resolve) => setTimeout(resolve, 1000));
    bursting.push(await ctx.measure(keygate, secureLoad));
    burstLogins.push(await burst);
  }
  const byP99 = (runs: Measured[]) => [...runs].sort((a, b) => a.p99 - b.p99)[runs.length >> 1];
  const medianUnloaded = byP99(unloaded);
  const versus = (run: Measured) =>
    `p99 ${(run.p99 / medianUnloaded.p99).toFixed(2)}× unloaded` +
    "; server CPU includes the logins";
  const load = `Lua, ${ctx.sampleSize.toLocaleString("en")} tokens`;
  const rounds = `median p99 of ${ctx.rounds} rounds`;
  const refused = burstLogins.map((run) => `${run.requests - run.errors}/${run.requests}`);
  ctx.notes.push(
    `Logins during the burst, answered 200 of all answers by round: ${refused.join(", ")} ` +
      `(the rest 503 service_busy), p99 ${
        burstLogins.map((run) => run.p99.toFixed(0)).join(", ")
      } ms.`,
  );
  const p99s = (runs: Measured[]) => runs.map((run) => run.p99.toFixed(2)).join(", ");
  ctx.notes.push(
    `Secure p99 by round (ms): unloaded ${p99s(unloaded)}; with issuance saturated ${
      p99s(loaded)
    }; during the login burst ${p99s(bursting)}.`,
  );
  return [
    {
      scenario: `secure GET, unloaded (${rounds})`,
      server: "keygate",
      load,
      result: medianUnloaded,
    },
    {
      scenario: `secure GET while issuance is saturated (${rounds})`,
      server: "keygate",
      load,
      result: byP99(loaded),
      extra: { [NOTE]: versus(byP99(loaded)) },
    },
    {
      scenario: `secure GET during a burst of ${BURST_LOGINS} queued logins (${rounds})`,
      server: "keygate",
      load,
      result: byP99(bursting),
      extra: { [NOTE]: versus(byP99(bursting)) },
    },
  ];
}

async function measureTwoCores(ctx: BenchContext, oneCore: Measured): Promise<Row> {
  ctx.log("password-hash limit on two cores");
  const cores = ctx.taskset ? "0,1" : undefined;
  const hashRate2 = await ctx.hashRate(cores);
  const keygate2 = await ctx.startKeygate("keygate-2cores", ctx.sqlitePath, cores);
  ctx.log("keygate, token issuance (JSON), two cores");
  const issue2 = await ctx.measure(
    keygate2,
    ctx.lua(keygate2.origin, ctx.issuerPairs, "issue-json"),
    {
      connections: 8,
    },
  );
  await keygate2.stop();
  return {
    scenario: "token issuance, JSON, 2 cores (wrk shares core 1)",
    server: "keygate",
    load: "Lua, 8 connections",
    result: issue2,
    extra: {
      [NOTE]: `${(issue2.rps / hashRate2).toFixed(2)} of ${hashRate2.toFixed(0)} hashes/s; ${
        (issue2.rps / oneCore.rps).toFixed(2)
      }× 1 core`,
    },
  };
}
