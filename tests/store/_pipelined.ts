/**
 * What the PostgreSQL pipelined-commit tests share: a deadline for writes that must settle, the
 * server log's stray COMMIT or ROLLBACK lines, the grant_epoch row held as a writer holds it, and
 * `psql` for a query made while this process's event loop is blocked.
 *
 * @module
 */
import type postgres from "postgres";
import { findPostgresBin, type PostgresCluster } from "../_helpers/postgres_cluster.ts";

/** Far beyond any load: a write that has not settled by then hangs, and fails the test. */
export const DEADLINE_MS = 30_000;

/**
 * The lines of the server's log about a COMMIT or ROLLBACK with no transaction open, written
 * while `run` ran (none: the chained transaction was there for `begin` to end).
 */
export async function strayEnds(
  cluster: PostgresCluster,
  run: () => Promise<void>,
): Promise<string[]> {
  const log = `${cluster.dir}/server.log`;
  const before = (await Deno.readTextFile(log)).length;
  await run();
  return (await Deno.readTextFile(log)).slice(before).split("\n")
    .filter((line) => line.includes("there is no transaction in progress"));
}

/** `promise`, or a rejection naming `what` after {@link DEADLINE_MS}. */
export async function settlesWithin<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle`)), DEADLINE_MS);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `psql` (the client beside the server's binaries, or on the PATH), for a query made while this
 * process's event loop is blocked.
 */
export function psqlPath(): string {
  const beside = `${findPostgresBin() ?? ""}/psql`;
  try {
    if (Deno.statSync(beside).isFile) return beside;
  } catch {
    // Not beside the server: Debian puts the client on the PATH.
  }
  return "psql";
}

/**
 * Holds the grant_epoch row's lock through `raw` (as a writer between its bump and its commit)
 * until released.
 */
export async function holdEpochRow(raw: postgres.Sql): Promise<{ release(): Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const holding = raw.begin(async (tx) => {
    await tx`SELECT epoch FROM grant_epoch WHERE id = 1 FOR UPDATE`;
    locked();
    await released;
  });
  await Promise.race([isLocked, holding]);
  return {
    async release() {
      release();
      await holding;
    },
  };
}
