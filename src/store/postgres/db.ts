/**
 * What every table group of the PostgreSQL store shares: the pool, reads
 * and writes that classify driver errors, and the one write path that
 * appends audit rows and bumps the grant epoch in the same transaction.
 *
 * @module
 */
import type postgres from "postgres";
import { StoreBlocked, StoreConflict, StoreError } from "../errors.ts";
import type { AuditEntry, AuditOf, GrantScope } from "../store.ts";
import { listAuditEntries } from "../audit_entries.ts";
import { guard } from "./errors.ts";
import { commitAfter, runTransaction } from "./transaction.ts";
import { GRANT_CHANNEL, type GrantEpochWatcher } from "./grant_epoch.ts";

/** How a write commits. */
export interface WriteOptions<T> {
  /** Audit rows, appended in the write's transaction. */
  audit?: AuditOf<T>;
  /**
   * The grants the write (given its result) may have ended or changed, by scope: when there
   * are any, it bumps the grant epoch, records them in the change record at the new position
   * and notifies, in its transaction, and commits synchronously whatever the durability.
   */
  ends: (result: T) => readonly GrantScope[];
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
  /** What the write's last statement recorded, if it bumped the epoch (see {@link toOwnChange}). */
  recorded: (result: T) => OwnChange | undefined;
}

/** A change this store committed: the position it bumped the epoch to, its tag, its scopes. */
export interface OwnChange {
  position: number;
  tag: number;
  scopes: readonly GrantScope[];
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
    options: { bump: SqlCondition; relaxed: SqlCondition; changes: SqlRows },
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
  /** Positions of the change record kept (see {@link CHANGE_RECORD_POSITIONS}). */
  recordPositions?: number;
  isClosed: () => boolean;
  onOperation?: OperationObserver;
}

/** The audit rows of a change, given its result. */
export function resolveAudit<T>(audit: AuditOf<T> | undefined, result: T): readonly AuditEntry[] {
  return listAuditEntries(typeof audit === "function" ? audit(result) : audit);
}

/** SQL text or a bound value that PostgreSQL reads as a boolean. */
export type SqlCondition = postgres.PendingQuery<postgres.Row[]> | boolean;

/** A query whose rows are a change's scopes: `(scope text, subject bigint)`. */
export type SqlRows = postgres.PendingQuery<postgres.Row[]>;

/**
 * Positions of the change record kept by default (each a grant-ending transaction): an instance
 * that has not read the record since more were written drops its caches.
 */
export const CHANGE_RECORD_POSITIONS = 10_000;

/** A random tag per position: 52 bits, exact as a JavaScript number. */
const RANDOM_TAG = "floor(random() * 4503599627370496)::bigint";

/** The rows of `scopes` as {@link SqlRows}. */
export function toScopeRows(tx: postgres.TransactionSql, scopes: readonly GrantScope[]): SqlRows {
  const rows = scopes.map((scope) => ({
    scope: scope.kind,
    subject: scope.kind === "all" ? null : scope.id,
  }));
  return tx`SELECT scope, subject FROM jsonb_to_recordset(${tx.json(rows)})
    AS c(scope text, subject bigint)`;
}

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
 * How a write's last statement ends its transaction: when `bump` holds, the grant epoch bumped
 * (the row's lock, held to the commit, orders positions as commits), the rows of `changes`
 * recorded in the change record at the new position with one random tag, the record pruned to
 * its last `keep` positions, and (unless `notify` is false) a notification whose payload, the
 * position and the first scopes, is only ever a prompt to read the record; or else, when `relax`
 * holds, a commit that skips the WAL flush (`synchronous_commit = off` for this transaction only;
 * never with a bump: a grant-ending commit always waits). `ctes` follows the statement's other
 * CTEs (it starts with a comma); `columns` are its result's `epoch` (the new epoch, or null),
 * `tag`, `notified`, `relaxed` and `unannounced` (always null: when `bump` holds and the
 * grant_epoch row is missing, the statement fails instead).
 */
export function endingClauses(
  tx: postgres.TransactionSql,
  options: {
    bump: SqlCondition;
    notify: boolean;
    relax: SqlCondition;
    changes: SqlRows;
    keep: number;
    /** The writing instance's tag in the payload (change_delay.ts), if any. */
    origin?: string;
  },
): { ctes: postgres.PendingQuery<postgres.Row[]>; columns: postgres.PendingQuery<postgres.Row[]> } {
  return {
    ctes: tx`, bumped AS (
      UPDATE grant_epoch SET epoch = epoch + 1 WHERE id = 1 AND ${options.bump}
      RETURNING epoch, ${tx.unsafe(RANDOM_TAG)} AS tag
    ), changed AS (
      SELECT scope, subject FROM (${options.changes}) AS c (scope, subject)
    ), recorded AS (
      INSERT INTO grant_changes (position, scope, subject, tag)
      SELECT b.epoch, c.scope, c.subject, b.tag FROM bumped b CROSS JOIN changed c
    ), pruned AS (
      DELETE FROM grant_changes WHERE position <= (SELECT epoch FROM bumped) - ${options.keep}
    )`,
    columns: tx`(SELECT epoch FROM bumped) AS epoch, (SELECT tag FROM bumped) AS tag,
      (SELECT pg_notify(${GRANT_CHANNEL}, epoch::text || ' ' || coalesce((
          SELECT string_agg(scope || coalesce(':' || subject::text, ''), ',' ORDER BY subject)
          FROM (SELECT scope, subject FROM changed ORDER BY subject LIMIT 16) AS first), '')
          -- The database's clock (ms) just before the commit: for the delay metric only.
          || ' @' || round(extract(epoch FROM clock_timestamp()) * 1000, 3)::text
          -- The writer's tag: its own notification is none of its change-delay metric's.
          || ${options.origin === undefined ? "" : ` #${options.origin}`})
        FROM bumped WHERE ${options.notify})
        AS notified,
      CASE WHEN ${options.relax} AND NOT (${options.bump})
        THEN set_config('synchronous_commit', 'off', true) END
        AS relaxed,
      -- To bump and no row bumped: the statement fails, so that a COMMIT sent behind it
      -- (transaction.ts) rolls back instead of committing the write unannounced; the write
      -- rejects with this text as a store error (classifyPostgresError). Not a constant
      -- (the planner would fold one whatever the condition): the cast only runs when it holds.
      (CASE WHEN ${options.bump} AND NOT EXISTS (SELECT 1 FROM bumped)
        THEN 'The grant_epoch row is missing' END)::int
        AS unannounced`,
  };
}

/**
 * What a write's last statement recorded (see {@link endingClauses}), if it bumped the epoch:
 * `scopes` are what it recorded (none: it was not to bump).
 * @throws {Error} when it was to bump and no epoch came back: the grant_epoch row is missing,
 * and a grant-ending write must not commit unannounced.
 */
export function toOwnChange(
  row: { epoch?: unknown; tag?: unknown } | undefined,
  scopes: readonly GrantScope[],
): OwnChange | undefined {
  const epoch = row?.epoch === null || row?.epoch === undefined ? undefined : Number(row.epoch);
  if (scopes.length > 0 && epoch === undefined) throw new Error("The grant_epoch row is missing");
  if (epoch === undefined || scopes.length === 0) return undefined;
  return { position: epoch, tag: Number(row!.tag), scopes };
}

/**
 * Ends a write's transaction in one statement: appends its audit rows and ends it as
 * {@link endingClauses} says, recording `scopes` (a bump when there are any: then the COMMIT
 * is sent right behind the statement, `commitAfter`).
 */
export async function finishWrite(
  tx: postgres.TransactionSql,
  entries: readonly AuditEntry[],
  options: {
    scopes: readonly GrantScope[];
    notify: boolean;
    relax: boolean;
    keep: number;
    origin?: string;
  },
): Promise<OwnChange | undefined> {
  const { scopes } = options;
  const ending = endingClauses(tx, {
    ...options,
    bump: scopes.length > 0,
    changes: toScopeRows(tx, scopes),
  });
  // A data-modifying CTE runs whether or not the outer query reads it.
  const statement = tx<{ epoch: number | null; tag: number | null }[]>`
    WITH appended AS (${auditInsert(tx, entries)}) ${ending.ctes}
    SELECT ${ending.columns}`;
  const [row] = scopes.length > 0 ? (await commitAfter(tx, [statement]))[0] : await statement;
  return toOwnChange(row, scopes);
}

export function createPgContext(options: PgContextOptions): PgContext {
  const { sql, watcher, notify, durability } = options;
  const keep = options.recordPositions ?? CHANGE_RECORD_POSITIONS;

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
        await guard(() =>
          runTransaction(sql, (tx) => tx`UPDATE grant_epoch SET epoch = epoch WHERE id = 1`)
        );
        writeFailure = undefined;
      } catch (error) {
        writeFailure = lastingWriteFailure(error) ?? writeFailure;
      }
      return writeFailure;
    },
    endingClauses(tx, { bump, relaxed, changes }) {
      return endingClauses(tx, {
        bump,
        notify,
        relax: durability === "grants" && relaxed,
        changes,
        keep,
        origin: watcher.origin,
      });
    },
    read(fn) {
      checkOpen();
      return measured("read", () => fn(sql));
    },
    async write(fn, writeOptions) {
      checkOpen();
      let own: OwnChange | undefined;
      let learned = false;
      // Our own caches evict what it touched at once, without waiting for a notification or a
      // poll, and so do those of the process's other stores (the shared ring), before the
      // caller answers anyone: as soon as the commit is known (a grant-ending write's, sent
      // behind its last statement, before `begin` ends the chained transaction), only then.
      const learn = () => {
        if (own === undefined || learned) return;
        learned = true;
        watcher.learnOwn(own);
      };
      let result: Awaited<ReturnType<typeof fn>>;
      try {
        result = await measured("write", () =>
          runTransaction(sql, async (tx) => {
            const value = await fn(tx);
            if ("recorded" in writeOptions) {
              own = writeOptions.recorded(value);
              return value;
            }
            own = await finishWrite(tx, resolveAudit(writeOptions.audit, value), {
              scopes: writeOptions.ends(value),
              notify,
              relax: durability === "grants" && writeOptions.relaxed?.(value) === true,
              keep,
              origin: watcher.origin,
            });
            return value;
          }, learn)) as Awaited<ReturnType<typeof fn>>;
        writeFailure = undefined;
      } catch (error) {
        writeFailure = lastingWriteFailure(error) ?? writeFailure;
        throw error;
      }
      learn();
      return result;
    },
  };
}
