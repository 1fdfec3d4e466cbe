/**
 * The rig of the "PostgreSQL beside SQLite" section (postgres.ts): the bench database in the
 * throwaway cluster (the seed copied in, the measurements' settings, the cluster pinned), and
 * what the measurements share over it: the servers started, wrk runs that add the cluster's CPU,
 * the loads, and the rows in SQLite/PostgreSQL pairs.
 *
 * @module
 */
import postgres from "postgres";
import type { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import { pinTree, readTreeCpuSeconds } from "./proc.ts";
import type { BenchContext } from "./context.ts";
import { formatRatio, type Measured, type Row } from "./report.ts";
import { copySeedToPostgres, runStatements } from "./seed_postgres.ts";
import type { Server } from "./servers.ts";
import type { Load, WrkOptions } from "./wrk.ts";

/** The section's columns: the ratio of a pair of rows, a row's target, a note. */
export const RATIO = "PostgreSQL/SQLite, same load";
export const TARGET = "target";
export const NOTE = "note";
/** The PostgreSQL settings the measurements run with (the test cluster's, with these over them). */
export const SETTINGS = { fsync: "on", full_page_writes: "on", shared_buffers: "256MB" };

/** What the section's measurements share: the cluster, the servers started, the rows. */
export interface PgBench {
  ctx: BenchContext;
  /** The bench database's URL. */
  url: string;
  /** The cluster's postmaster, whose process tree is PostgreSQL's CPU. */
  postmaster: number;
  /** Whether PostgreSQL is pinned to the servers' core. */
  pinned: boolean;
  servers: Server[];
  rows: Row[];
  /** A new database in the cluster; its URL. */
  createDatabase(name: string): Promise<string>;
  /** Counts PostgreSQL's CPU in `server`'s measurements (a server started elsewhere). */
  onPostgres(server: Server): void;
  start(name: string, store: string, extra?: string[]): Promise<Server>;
  stop(...servers: Server[]): Promise<void>;
  /** Runs wrk; for keygate on PostgreSQL, adds the CPU per request of the whole cluster. */
  measure(server: Server, load: Load, options?: Partial<WrkOptions>): Promise<Measured>;
  fixed(server: Server): Load;
  lua(server: Server, pairs: string, mode: string): Load;
  /** Adds a SQLite row and a PostgreSQL row with their ratio. */
  pair(scenario: string, load: string, lite: Measured, pg: Measured, target?: string): void;
}

/** Creates the bench database, copies the seed into it, applies SETTINGS and pins the cluster. */
export async function prepareDatabase(
  ctx: BenchContext,
  cluster: Awaited<ReturnType<typeof startPostgres>>,
): Promise<{ url: string; copySeconds: number; postmaster: number; pinned: boolean }> {
  const url = await cluster.createDatabase("bench");
  ctx.log(`copying ${ctx.tokens.toLocaleString("en")} tokens into PostgreSQL`);
  const copyStarted = performance.now();
  await copySeedToPostgres(ctx.sqlitePath, url);
  const copySeconds = (performance.now() - copyStarted) / 1000;
  await runStatements(
    url,
    Object.entries(SETTINGS).map(([name, value]) => `ALTER SYSTEM SET ${name} = '${value}'`),
  );
  await cluster.pause();
  await cluster.resume();
  const postmaster = Number(
    (await Deno.readTextFile(`${cluster.dir}/data/postmaster.pid`)).split("\n")[0],
  );
  const pinned = await pinTree(postmaster, ctx.serverCore);
  return { url, copySeconds, postmaster, pinned };
}

/** The measurements' shared state and helpers over one cluster and its bench database. */
export function createPgBench(
  ctx: BenchContext,
  db: {
    url: string;
    postmaster: number;
    pinned: boolean;
    servers: Server[];
    createDatabase(name: string): Promise<string>;
  },
): PgBench {
  const { servers, postmaster } = db;
  const onPostgres = new Set<Server>();
  const rows: Row[] = [];
  const one = ctx.sample[0];
  return {
    ctx,
    ...db,
    rows,
    onPostgres: (server) => void onPostgres.add(server),
    async start(name, store, extra = []) {
      const server = await ctx.startKeygate(name, store, ctx.serverCore, extra);
      servers.push(server);
      if (store !== ctx.sqlitePath) onPostgres.add(server);
      return server;
    },
    async stop(...stopping) {
      for (const server of stopping) {
        servers.splice(servers.indexOf(server), 1);
        await server.stop();
      }
    },
    async measure(server, load, options = {}) {
      if (!onPostgres.has(server)) return await ctx.measure(server, load, options);
      const before = readTreeCpuSeconds(postmaster);
      const result = await ctx.measure(server, load, options);
      const spent = readTreeCpuSeconds(postmaster) - before;
      return { ...result, dbCpuUsPerRequest: spent * 1e6 / result.requests };
    },
    fixed: (server) => ({
      kind: "fixed",
      url: `${server.origin}/api/secure/userservice/tokens/current?api_key=${one.apiKey}` +
        `&api_token=${one.token}`,
    }),
    lua: (server, pairs, mode) => ({ kind: "lua", url: server.origin, args: [pairs, mode] }),
    pair(scenario, load, lite, pg, target) {
      rows.push(
        { scenario, server: "keygate on SQLite", load, result: lite },
        {
          scenario,
          server: "keygate on PostgreSQL",
          load,
          result: pg,
          extra: {
            [RATIO]: formatRatio(pg, lite),
            ...(target === undefined ? {} : { [TARGET]: target }),
          },
        },
      );
    },
  };
}

/** PostgreSQL's version, as `PostgreSQL 17.2`. */
export async function readVersion(url: string): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ server_version: string }[]>`SHOW server_version`;
    return `PostgreSQL ${row.server_version.split(" ")[0]}`;
  } finally {
    await sql.end();
  }
}
