/**
 * What every table group of the PostgreSQL store shares: the pool, reads
 * and writes that classify driver errors, and the one write path that
 * appends audit rows and bumps the grant epoch in the same transaction.
 *
 * @module
 */
import type postgres from "postgres";
import { StoreBlocked, StoreConflict, StoreError } from "../errors.ts";
import type { AuditEntry, AuditOf } from "../store.ts";
import { listAuditEntries } from "../audit_entries.ts";
import { guard } from "./errors.ts";
import { GRANT_CHANNEL, type GrantEpochWatcher } from "./grant_epoch.ts";

/** How a write commits. */
export interface WriteOptions<T> {
  /** Audit rows, appended in the write's transaction. */
  audit?: AuditOf<T>;
  /**
   * Whether the write (given its result) may have ended or changed a token
   * grant: then it bumps the grant epoch and notifies, in its transaction,
   * and commits synchronously whatever the durability.
   */
  endsGrants: (result: T) => boolean;
  /**
   * Whether the write (given its result) may commit without waiting for the
   * WAL flush (`synchronous_commit = off`) under durability `"grants"`:
   * bookkeeping and new tokens, never a revocation.
   */
  relaxed?: (result: T) => boolean;
}

/**
 * A write whose own last statement appends its audit rows and ends its transaction (with
 * {@link auditInsert} and the context's {@link PgContext.endingClauses}), one statement fewer.
 */
export interface SelfEndingWrite<T> {
  /** The epoch the write's last statement bumped, if it did (see {@link toBumpedEpoch}). */
  bumpedEpoch: (result: T) => number | undefined;
}

/** The shared context of the store's table groups. */
export interface PgContext {
  sql: postgres.Sql;
  /** Runs a read; driver errors become store errors. */
  read<T>(fn: (sql: postgres.Sql) => Promise<T>): Promise<T>;
  /** Runs a write in one transaction, with its audit rows and (when it ends grants) an epoch bump. */
  write<T>(
    fn: (tx: postgres.TransactionSql) => Promise<T>,
    options: WriteOptions<T> | SelfEndingWrite<T>,
  ): Promise<T>;
  /**
   * {@link endingClauses} with this store's settings: a notification unless the engine has none,
   * and a relaxed commit (when `relaxed` holds) only under durability `"grants"`.
   */
  endingClauses(
    tx: postgres.TransactionSql,
    options: { bump: SqlCondition; relaxed: SqlCondition },
  ): ReturnType<typeof endingClauses>;
  /** Reads and writes under way now (each holds at most one pooled connection). */
  readInFlight(): number;
  /** See `Store.findWriteFailure`: a probe write first, so that readiness recovers by itself. */
  findWriteFailure(): Promise<string | undefined>;
}

/**
 * SQLSTATEs of write failures a retry will not soon cure: the disk is full,
 * or the server is a read-only standby (after a failover that went the
 * wrong way). `/readyz` reports them as `degraded`.
 */
const LASTING_WRITE_FAILURES = new Set(["53100", "25006"]);

function lastingWriteFailure(error: unknown): string | undefined {
  const cause = error instanceof Error && error.cause !== undefined ? error.cause : error;
  const code = (cause as { code?: unknown } | null)?.code;
  if (typeof code !== "string" || !LASTING_WRITE_FAILURES.has(code)) return undefined;
  return String((cause as Error).message).slice(0, 200);
}

/**
 * How a read or write ended: `"refused"` when the database answered and the store refused the
 * write by design (a conflict, or a login that a throttle counter blocks), `"error"` when it failed.
 */
export type OperationOutcome = "ok" | "refused" | "error";

/** Told of every read and write that ended, for the latency metric. */
export type OperationObserver = (
  kind: "read" | "write",
  seconds: number,
  outcome: OperationOutcome,
) => void;

/** Options for {@link createPgContext}. */
export interface PgContextOptions {
  sql: postgres.Sql;
  watcher: GrantEpochWatcher;
  /** Whether grant-ending writes call `pg_notify` (false for engines without NOTIFY). */
  notify: boolean;
  /** `"grants"`: only grant-ending writes wait for the WAL flush; `"full"`: every write does. */
  durability: "full" | "grants";
  isClosed: () => boolean;
  onOperation?: OperationObserver;
}

/** The audit rows of a change, given its result. */
export function resolveAudit<T>(audit: AuditOf<T> | undefined, result: T): readonly AuditEntry[] {
  return listAuditEntries(typeof audit === "function" ? audit(result) : audit);
}

/** SQL text or a bound value that PostgreSQL reads as a boolean. */
export type SqlCondition = postgres.PendingQuery<postgres.Row[]> | boolean;

/**
 * The `INSERT INTO audit_log` of a write's `entries`, for a CTE of its statement. With `tokenIdOf`
 * (SQL naming one row with an `id` column, such as a CTE of inserted tokens), each entry is
 * appended once per row of it, with that id added to its detail as `token_id`: none without a row.
 */
export function auditInsert(
  tx: postgres.TransactionSql,
  entries: readonly AuditEntry[],
  tokenIdOf?: postgres.PendingQuery<postgres.Row[]>,
): postgres.PendingQuery<postgres.Row[]> {
  const rows = entries.map((entry) => ({ ...entry, detail: entry.detail ?? {} }));
  return tx`INSERT INTO audit_log (at, actor, action, subject, detail)
      SELECT at, actor, action, subject, ${
    tokenIdOf === undefined ? tx`detail` : tx`detail || jsonb_build_object('token_id', token.id)`
  }
      FROM ROWS FROM (jsonb_to_recordset(${tx.json(rows)})
          AS (at bigint, actor text, action text, subject text, detail jsonb))
        WITH ORDINALITY AS entry(at, actor, action, subject, detail, ord)
        ${tokenIdOf === undefined ? tx`` : tx`CROSS JOIN ${tokenIdOf} AS token`}
      WHERE ${rows.length > 0}
      -- Ids in the order given: SQL promises no order of a function scan without this.
      ORDER BY ord`;
}

/**
 * How a write's last statement ends its transaction: the grant epoch bumped when `bump` holds
 * (with a notification unless `notify` is false), or else, when `relax` holds, a commit that skips
 * the WAL flush (`synchronous_commit = off` for this transaction only; never with a bump: a
 * grant-ending commit always waits). `ctes` follows the statement's other CTEs (it starts with a
 * comma); `columns` are its result's `epoch` (the new epoch, or null), `notified` and `relaxed`.
 */
export function endingClauses(
  tx: postgres.TransactionSql,
  options: { bump: SqlCondition; notify: boolean; relax: SqlCondition },
): { ctes: postgres.PendingQuery<postgres.Row[]>; columns: postgres.PendingQuery<postgres.Row[]> } {
  return {
    ctes: tx`, bumped AS (
      UPDATE grant_epoch SET epoch = epoch + 1 WHERE id = 1 AND ${options.bump} RETURNING epoch
    )`,
    columns: tx`(SELECT epoch FROM bumped) AS epoch,
      (SELECT pg_notify(${GRANT_CHANNEL}, epoch::text) FROM bumped WHERE ${options.notify})
        AS notified,
      CASE WHEN ${options.relax} AND NOT (${options.bump})
        THEN set_config('synchronous_commit', 'off', true) END
        AS relaxed`,
  };
}

/**
 * The epoch a write's last statement bumped (see {@link endingClauses}), if it did.
 * @throws {Error} when it was to bump (`bumped`) and no epoch came back: the grant_epoch row is
 * missing, and a grant-ending write must not commit unannounced.
 */
export function toBumpedEpoch(
  row: { epoch?: unknown } | undefined,
  bumped: boolean,
): number | undefined {
  const epoch = row?.epoch === null || row?.epoch === undefined ? undefined : Number(row.epoch);
  if (bumped && epoch === undefined) throw new Error("The grant_epoch row is missing");
  return epoch;
}

/**
 * Ends a write's transaction in one statement: appends its audit rows and ends it as
 * {@link endingClauses} says. Returns the new epoch when it bumped.
 */
export async function finishWrite(
  tx: postgres.TransactionSql,
  entries: readonly AuditEntry[],
  options: { bump: boolean; notify: boolean; relax: boolean },
): Promise<number | undefined> {
  const ending = endingClauses(tx, options);
  // A data-modifying CTE runs whether or not the outer query reads it.
  const [row] = await tx<{ epoch: number | null }[]>`
    WITH appended AS (${auditInsert(tx, entries)}) ${ending.ctes}
    SELECT ${ending.columns}`;
  return toBumpedEpoch(row, options.bump);
}

export function createPgContext(options: PgContextOptions): PgContext {
  const { sql, watcher, notify, durability } = options;

  let inFlight = 0;
  let writeFailure: string | undefined;

  function checkOpen(): void {
    if (options.isClosed()) throw new StoreError("The store is closed");
  }

  async function measured<T>(kind: "read" | "write", fn: () => Promise<T>): Promise<T> {
    const started = performance.now();
    inFlight++;
    let outcome: OperationOutcome = "error";
    try {
      const result = await guard(fn);
      outcome = "ok";
      return result;
    } catch (error) {
      if (error instanceof StoreConflict || error instanceof StoreBlocked) outcome = "refused";
      throw error;
    } finally {
      inFlight--;
      options.onOperation?.(kind, (performance.now() - started) / 1000, outcome);
    }
  }

  return {
    sql,
    readInFlight: () => inFlight,
    async findWriteFailure() {
      if (writeFailure === undefined) return undefined;
      try {
        // A write that changes nothing anyone reads: the epoch row set to itself.
        await guard(() => sql.begin((tx) => tx`UPDATE grant_epoch SET epoch = epoch WHERE id = 1`));
        writeFailure = undefined;
      } catch (error) {
        writeFailure = lastingWriteFailure(error) ?? writeFailure;
      }
      return writeFailure;
    },
    endingClauses(tx, { bump, relaxed }) {
      return endingClauses(tx, { bump, notify, relax: durability === "grants" && relaxed });
    },
    read(fn) {
      checkOpen();
      return measured("read", () => fn(sql));
    },
    async write(fn, writeOptions) {
      checkOpen();
      let epoch: number | undefined;
      let result: Awaited<ReturnType<typeof fn>>;
      try {
        result = await measured("write", () =>
          sql.begin(async (tx) => {
            const value = await fn(tx);
            if ("bumpedEpoch" in writeOptions) {
              epoch = writeOptions.bumpedEpoch(value);
              return value;
            }
            const bump = writeOptions.endsGrants(value);
            epoch = await finishWrite(tx, resolveAudit(writeOptions.audit, value), {
              bump,
              notify,
              relax: durability === "grants" && writeOptions.relaxed?.(value) === true,
            });
            return value;
          })) as Awaited<ReturnType<typeof fn>>;
        writeFailure = undefined;
      } catch (error) {
        writeFailure = lastingWriteFailure(error) ?? writeFailure;
        throw error;
      }
      // Our own cache drops at once, without waiting for our own notification, and so do those
      // of the process's other stores (the shared counter), before the caller answers anyone.
      if (epoch !== undefined) watcher.advanceTo(epoch);
      return result;
    },
  };
}
