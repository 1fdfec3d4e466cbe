/**
 * The bench's "Secure path against the ceiling" section: a bare `Deno.serve`
 * over HTTPS (the ceiling), the bare server answering as keygate answers, and
 * keygate's secure GET with a fixed URL and with distinct tokens (Lua), on the
 * big database and on one of 1,000 tokens, in alternating rounds.
 *
 * @module
 */
import { type BenchContext, type SectionReport, writePairs } from "./context.ts";
import { formatCpuRatio, formatRatio, type Measured, type Row } from "./report.ts";
import { seedDatabase } from "./seed.ts";
import { pinTo, startServer } from "./servers.ts";

export const RATIO_SAME = "keygate/bare, same load";
export const RATIO_CEILING = "keygate/bare fixed (ceiling)";
export const RATIO_CPU = "bare/keygate server CPU per request";
/** The bare server answering as keygate does: what is left is keygate's own work. */
export const RATIO_SHAPED = "bare as keygate/keygate server CPU per request";
/** With `--baseline`: today's keygate against the revision's, same load, same run. */
export const RATIO_BASELINE = "keygate/baseline, same load";

/**
 * With `--baseline REV`: that revision's keygate on a database of the same size seeded by the
 * revision itself (its schema), pinned and measured like today's; undefined without it.
 */
async function startBaselineKeygate(ctx: BenchContext) {
  const baseline = ctx.baseline;
  if (baseline === undefined) return undefined;
  ctx.log(`seeding ${ctx.tokens} live tokens for the baseline ${baseline.label}`);
  const path = `${ctx.work}/baseline.sqlite3`;
  const sample = await baseline.seedSqlite(path, {
    tokens: ctx.tokens,
    sample: ctx.sampleSize,
    passwordHash: ctx.passwordHash,
  });
  const pairs = await writePairs(ctx.work, "baseline", sample);
  const server = await ctx.startKeygate("keygate-baseline", path, ctx.serverCore, [], {
    from: baseline,
  });
  return { server, pairs, label: baseline.label };
}

/** Runs the section (starting the shared keygate on the big database). */
export async function runSecureSection(ctx: BenchContext): Promise<SectionReport> {
  const keygate = await ctx.bigKeygate();
  const smallTokens = Math.min(1000, ctx.tokens);
  ctx.log(`seeding ${smallTokens} live tokens`);
  const small = await seedDatabase(`${ctx.work}/small.sqlite3`, {
    tokens: smallTokens,
    sample: smallTokens,
    passwordHash: ctx.passwordHash,
  });
  const smallPairs = await writePairs(ctx.work, "small", small.sample);
  const startBare = (name: string, permissions: string[], args: string[]) =>
    startServer(
      ctx.work,
      name,
      pinTo(
        ctx.serverCore,
        ctx.denoRun(permissions, "./bare_server.ts", [
          ...args,
          `${ctx.work}/cert.pem`,
          `${ctx.work}/key.pem`,
        ]),
      ),
      /listening (\d+)/,
    );
  const bare = await startBare("bare", ["--allow-net", "--allow-read"], []);
  const shaped = await startBare("bare-shaped", ["--allow-net", "--allow-read", "--allow-ffi"], [
    "--keygate-shape",
  ]);
  const keygateSmall = await ctx.startKeygate(
    "keygate-small",
    `${ctx.work}/small.sqlite3`,
    ctx.serverCore,
  );
  const before = await startBaselineKeygate(ctx);
  const { lua, fixedQuery, fixedBearer, pairs } = ctx;
  ctx.log("warming up the servers");
  if (before !== undefined) {
    await ctx.measure(before.server, lua(before.server.origin, before.pairs, "query"), {
      duration: 2,
    });
  }
  await ctx.measure(bare, fixedQuery(bare.origin), { duration: 2 });
  await ctx.measure(shaped, fixedBearer(shaped.origin), { duration: 2 });
  await ctx.measure(keygate, lua(keygate.origin, pairs, "query"), { duration: 2 });
  await ctx.measure(keygateSmall, lua(keygateSmall.origin, smallPairs, "query"), { duration: 2 });
  const secure = await ctx.alternate("secure path", {
    "bare, fixed": () => ctx.measure(bare, fixedQuery(bare.origin)),
    "bare, lua": () => ctx.measure(bare, lua(bare.origin, pairs, "query")),
    "bare as keygate, fixed bearer": () => ctx.measure(shaped, fixedBearer(shaped.origin)),
    "keygate, fixed query": () => ctx.measure(keygate, fixedQuery(keygate.origin)),
    "keygate, fixed bearer": () => ctx.measure(keygate, fixedBearer(keygate.origin)),
    "keygate, lua query": () => ctx.measure(keygate, lua(keygate.origin, pairs, "query")),
    "keygate, lua bearer": () => ctx.measure(keygate, lua(keygate.origin, pairs, "bearer")),
    "keygate 1k, lua query": () =>
      ctx.measure(keygateSmall, lua(keygateSmall.origin, smallPairs, "query")),
    ...(before === undefined ? {} : {
      "baseline, lua query": () =>
        ctx.measure(before.server, lua(before.server.origin, before.pairs, "query")),
    }),
  });
  const smallRss = keygateSmall.readRssMiB();
  await keygateSmall.stop(); // idle from here on; stopped so that it cannot disturb what follows
  const rows = toRows(ctx, secure, {
    bare: bare.readRssMiB(),
    shaped: shaped.readRssMiB(),
    keygate: keygate.readRssMiB(),
    small: smallRss,
  }, smallTokens);
  await bare.stop();
  await shaped.stop();
  if (before !== undefined) {
    const base = secure["baseline, lua query"];
    rows.push({
      scenario: `secure GET, api_token in query, ${ctx.tokens.toLocaleString("en")} tokens`,
      server: `keygate at the baseline, ${before.label}`,
      load: `Lua, ${ctx.sampleSize.toLocaleString("en")} tokens`,
      result: base,
      rssMiB: before.server.readRssMiB(),
      extra: {
        [RATIO_BASELINE]: `${formatRatio(secure["keygate, lua query"], base)} (today/baseline)`,
        [RATIO_CEILING]: formatRatio(base, secure["bare, fixed"]),
        [RATIO_CPU]: formatCpuRatio(secure["bare, fixed"], base),
      },
    });
    await before.server.stop();
  }
  ctx.shared.secureLua = secure["keygate, lua query"];
  return {
    title: "Secure path against the ceiling",
    rows,
    columns: [
      RATIO_SAME,
      RATIO_CEILING,
      RATIO_CPU,
      RATIO_SHAPED,
      ...(before === undefined ? [] : [RATIO_BASELINE]),
    ],
  };
}

/** The section's rows from the medians of its runs, with the servers' memory. */
function toRows(
  ctx: BenchContext,
  secure: Record<string, Measured>,
  rss: Record<"bare" | "shaped" | "keygate" | "small", number | undefined>,
  smallTokens: number,
): Row[] {
  const fixedLoad = "fixed URL";
  const luaLoad = `Lua, ${ctx.sampleSize.toLocaleString("en")} tokens`;
  const millionTokens = `${ctx.tokens.toLocaleString("en")} tokens`;
  const ceiling = secure["bare, fixed"];
  const asKeygate = secure["bare as keygate, fixed bearer"];
  const rows: Row[] = [
    {
      scenario: "secure GET (answers 3 bytes)",
      server: "bare Deno.serve",
      load: fixedLoad,
      result: ceiling,
      rssMiB: rss.bare,
      extra: { [RATIO_CEILING]: "(the ceiling)" },
    },
    {
      scenario: "secure GET (answers 3 bytes)",
      server: "bare Deno.serve",
      load: luaLoad,
      result: secure["bare, lua"],
      extra: { [RATIO_CEILING]: formatRatio(secure["bare, lua"], ceiling) },
    },
    {
      scenario: "secure GET answered as keygate answers (its headers, its body size)",
      server: "bare Deno.serve",
      load: fixedLoad,
      result: asKeygate,
      rssMiB: rss.shaped,
      extra: {
        [RATIO_CEILING]: formatRatio(asKeygate, ceiling),
        [RATIO_CPU]: formatCpuRatio(ceiling, asKeygate),
      },
    },
  ];
  for (
    const [name, scenario, load, sameLoad] of [
      [
        "keygate, fixed query",
        `secure GET, api_token in query, ${millionTokens}`,
        fixedLoad,
        "fixed",
      ],
      ["keygate, fixed bearer", `secure GET, Bearer, ${millionTokens}`, fixedLoad, "fixed"],
      ["keygate, lua query", `secure GET, api_token in query, ${millionTokens}`, luaLoad, "lua"],
      ["keygate, lua bearer", `secure GET, Bearer, ${millionTokens}`, luaLoad, "lua"],
    ] as const
  ) {
    const result = secure[name];
    rows.push({
      scenario,
      server: "keygate",
      load,
      result,
      rssMiB: rss.keygate,
      extra: {
        [RATIO_SAME]: formatRatio(result, sameLoad === "lua" ? secure["bare, lua"] : ceiling),
        [RATIO_CEILING]: formatRatio(result, ceiling),
        [RATIO_CPU]: formatCpuRatio(ceiling, result),
        [RATIO_SHAPED]: formatCpuRatio(asKeygate, result),
      },
    });
  }
  const smallQuery = secure["keygate 1k, lua query"];
  rows.push({
    scenario: `secure GET, api_token in query, ${smallTokens.toLocaleString("en")} tokens`,
    server: "keygate",
    load: `Lua, ${smallTokens.toLocaleString("en")} tokens`,
    result: smallQuery,
    rssMiB: rss.small,
    extra: {
      [RATIO_SAME]: formatRatio(smallQuery, secure["bare, lua"]),
      [RATIO_CEILING]: formatRatio(smallQuery, ceiling),
      [RATIO_CPU]: formatCpuRatio(ceiling, smallQuery),
    },
  });
  ctx.notes.push(
    `With ${millionTokens} the secure path (Lua, query) runs at ${
      (secure["keygate, lua query"].rps / smallQuery.rps * 100).toFixed(0)
    }% of its rate with ${smallTokens.toLocaleString("en")} (medians).`,
  );
  return rows;
}
