/**
 * The bench's "Using every core" section: N listeners on one port. Nothing
 * pinned: the servers and wrk (two threads) share every core, as on a
 * user's machine. The bare server shows what reusePort gives on this machine,
 * in threads and in processes; keygate runs --workers 1 and --workers N
 * (threads). Fixed URL, the load that reaches the server's limit.
 *
 * @module
 */
import type { BenchContext, SectionReport } from "./context.ts";
import { formatRatio, type Row } from "./report.ts";
import { type Server, startServer } from "./servers.ts";

const RSS_PER_WORKER = "RSS MiB per worker";
const SCALING = "× 1 worker";

/** Runs the section (with the shared keygate stopped: nothing else runs meanwhile). */
export async function runScalingSection(ctx: BenchContext): Promise<SectionReport> {
  await ctx.stopBigKeygate();
  const cores = navigator.hardwareConcurrency;
  const spread = { cores: undefined, threads: Math.min(2, cores) };
  const bareN = (n: number, mode: string) =>
    startServer(
      ctx.work,
      `bare-${n}-${mode}`,
      ctx.denoRun(
        ["--allow-net", "--allow-read", "--allow-run", "--unstable-net"],
        "./bare_server.ts",
        [`${ctx.work}/cert.pem`, `${ctx.work}/key.pem`, String(n), mode],
      ),
      /listening (\d+)/,
    );
  const keygateN = (n: number) =>
    ctx.startKeygate(`keygate-w${n === 1 ? 1 : "n"}`, ctx.sqlitePath, undefined, [
      "--workers",
      String(n),
    ]);
  const scaling: { name: string; server: Server; workers: number }[] = [
    { name: "bare, 1 listener", server: await bareN(1, "threads"), workers: 1 },
    { name: `bare, ${cores} threads`, server: await bareN(cores, "threads"), workers: cores },
    { name: `bare, ${cores} processes`, server: await bareN(cores, "processes"), workers: cores },
    { name: "keygate, --workers 1", server: await keygateN(1), workers: 1 },
    { name: `keygate, --workers ${cores}`, server: await keygateN(cores), workers: cores },
  ];
  ctx.log("warming up the workers");
  for (const { server } of scaling) {
    await ctx.measure(server, ctx.fixedQuery(server.origin), { ...spread, duration: 2 });
  }
  const scaled = await ctx.alternate(
    "every core",
    Object.fromEntries(
      scaling.map((
        { name, server },
      ) => [name, () => ctx.measure(server, ctx.fixedQuery(server.origin), spread)]),
    ),
  );
  const rows: Row[] = [];
  for (const { name, server, workers } of scaling) {
    const bare = name.startsWith("bare");
    const one = bare ? scaled["bare, 1 listener"] : scaled["keygate, --workers 1"];
    const rss = server.readRssMiB();
    rows.push({
      scenario: bare
        ? "secure GET (answers 3 bytes)"
        : `secure GET, ${ctx.tokens.toLocaleString("en")} tokens`,
      server: name,
      load: `fixed URL, wrk ${spread.threads} threads, nothing pinned`,
      result: scaled[name],
      rssMiB: rss,
      extra: {
        [RSS_PER_WORKER]: rss === undefined ? "" : (rss / workers).toFixed(1),
        [SCALING]: workers === 1 ? "(1 worker)" : formatRatio(scaled[name], one, "×"),
      },
    });
    await server.stop();
  }
  return { title: "Using every core", rows, columns: [RSS_PER_WORKER, SCALING] };
}
