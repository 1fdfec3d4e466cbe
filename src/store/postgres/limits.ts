/**
 * Limits and their counters on PostgreSQL (src/store/store_limits.ts). A lease locks the
 * counters it touches in one order (limit id, subject), so concurrent leases of instances
 * sharing a user's limit never deadlock, and grants through `planLease` (limit_lease.ts), the
 * arithmetic the SQLite backend uses too.
 *
 * @module
 */
import type postgres from "postgres";
import { StoreConflict } from "../errors.ts";
import { planLease, planReturn, type StoredCounter, toCounterAt } from "../limit_lease.ts";
import { type Row, toLimitRule, toStoredCounter } from "../rows.ts";
import type {
  GrantScope,
  LimitLeaseRequest,
  LimitPeriod,
  LimitReturn,
  LimitRule,
  LimitSlice,
  LimitStore,
  LimitUsage,
  NewLimit,
} from "../store.ts";
import { toLimitSubject, toLimitWindow } from "../store_limits.ts";
import type { PgContext } from "./db.ts";
import { toLimitKeys, toReturnSubjects } from "./limit_chains.ts";

/** The grant scope a change of this limit touches. */
function scopeOf(rule: LimitRule | undefined): GrantScope[] {
  if (rule === undefined) return [];
  if (rule.scope === "default") return [{ kind: "all" }];
  return [{ kind: rule.scope, id: rule.subjectId! }];
}

function applying(
  sql: postgres.Sql | postgres.TransactionSql,
  owner: { apiKeyId: number; userId: number },
) {
  return sql<Row[]>`SELECT * FROM limits l
    WHERE (l.scope = 'key' AND l.api_key_id = ${owner.apiKeyId})
      OR (l.scope = 'user' AND l.user_id = ${owner.userId})
      OR (l.scope = 'default' AND NOT EXISTS (SELECT 1 FROM limits o
        WHERE o.scope = 'key' AND o.api_key_id = ${owner.apiKeyId} AND o.kind = l.kind))
    ORDER BY l.id`;
}

/**
 * Counters per statement: a statement takes at most 65,535 parameters (6 per counter written), so
 * a batch of more counters (a clean stop returning the units of 10,000 keys' two limits) is sent as
 * several statements of the same transaction, in the lock order of the rows they hold.
 */
const COUNTERS_PER_STATEMENT = 2_000;

/** `items` in consecutive slices of at most {@link COUNTERS_PER_STATEMENT}. */
function toChunks<T>(items: readonly T[]): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += COUNTERS_PER_STATEMENT) {
    chunks.push(items.slice(i, i + COUNTERS_PER_STATEMENT));
  }
  return chunks;
}

/** `limit_id:subject_id` keys in lock order, limit id then subject. */
function toLockOrder(ids: Iterable<string>): number[][] {
  return [...ids].map((id) => id.split(":").map(Number)).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

/** Writes counters (`limit_id:subject_id` → counter), in lock order, a chunk per statement. */
async function writeCounters(tx: postgres.TransactionSql, written: Map<string, StoredCounter>) {
  const rows = toLockOrder(written.keys()).map(([limitId, subjectId]) => {
    const c = written.get(`${limitId}:${subjectId}`)!;
    return [limitId, subjectId, c.windowStart, c.used, c.nextUsed, c.nextStart];
  });
  for (const chunk of toChunks(rows)) {
    await tx`UPDATE limit_usage u SET window_start = w.window_start::bigint,
        used = w.used::bigint, next_used = w.next_used::bigint, next_start = w.next_start::bigint
      FROM (VALUES ${tx(chunk)})
        AS w (limit_id, subject_id, window_start, used, next_used, next_start)
      WHERE u.limit_id = w.limit_id::bigint AND u.subject_id = w.subject_id::bigint`;
  }
}

/**
 * `returnLimitUnits`' reads and writes, in its transaction: the counters locked in limit-then-
 * subject order (as a lease locks them) and read with their limit's period, the returns planned
 * (limit_lease.ts), the changed counters written; a chunk of counters per statement.
 */
async function writeReturns(tx: postgres.TransactionSql, given: readonly LimitReturn[]) {
  const units = await toReturnSubjects(tx, given);
  const keys = toLockOrder(new Set(units.map((u) => `${u.limitId}:${u.subjectId}`)));
  const stored = new Map<string, Row>();
  for (const chunk of toChunks(keys)) {
    const rows = await tx<Row[]>`SELECT u.limit_id, u.subject_id, u.window_start, u.used,
        u.next_used, u.next_start, l.period
      FROM limit_usage u JOIN limits l ON l.id = u.limit_id
      JOIN (VALUES ${tx(chunk)}) AS k (limit_id, subject_id)
        ON u.limit_id = k.limit_id::bigint AND u.subject_id = k.subject_id::bigint
      ORDER BY u.limit_id, u.subject_id
      FOR UPDATE OF u`;
    for (const row of rows) stored.set(`${row.limit_id}:${row.subject_id}`, row);
  }
  const counters = new Map<string, StoredCounter>();
  const written = new Map<string, StoredCounter>();
  for (const unit of units) {
    const id = `${unit.limitId}:${unit.subjectId}`;
    const row = stored.get(id);
    if (row === undefined) continue;
    const counter = counters.get(id) ?? toStoredCounter(row);
    const write = planReturn(row.period as LimitPeriod, counter, unit);
    if (write === undefined) continue;
    counters.set(id, write);
    written.set(id, write);
  }
  if (written.size > 0) await writeCounters(tx, written);
}

/** `putLimit`'s reads and writes, in its transaction. */
async function writeLimit(
  tx: postgres.TransactionSql,
  limit: NewLimit,
  now: number,
): Promise<LimitRule> {
  const subject = limit.subjectId ?? 0;
  if (limit.scope !== "default") {
    const table = limit.scope === "key" ? tx`api_keys` : tx`users`;
    const column = limit.scope === "key" ? tx`replaced_by` : tx`NULL AS replaced_by`;
    const [found] = await tx<Row[]>`SELECT ${column} FROM ${table} WHERE id = ${subject}
      FOR KEY SHARE`;
    if (found === undefined) throw new StoreConflict(`No ${limit.scope} ${subject} to limit`);
    // Its limits are its successor's (moved by the rotation): one set here would never apply.
    if (found.replaced_by !== null) throw new StoreConflict(`Key ${subject} was rotated`);
  }
  const [same] = await tx<Row[]>`SELECT * FROM limits
    WHERE scope = ${limit.scope} AND coalesce(api_key_id, user_id, 0) = ${subject}
      AND kind = ${limit.kind} AND (kind = 'quota' OR period = ${limit.period})
    FOR UPDATE`;
  if (same !== undefined) {
    // A quota whose refill period changes starts counting afresh.
    if (same.period !== limit.period) {
      await tx`DELETE FROM limit_usage WHERE limit_id = ${same.id as number}`;
    }
    const [row] = await tx<Row[]>`UPDATE limits SET max = ${limit.max},
        period = ${limit.period}, updated_at = ${now}
      WHERE id = ${same.id as number} RETURNING *`;
    return toLimitRule(row);
  }
  const [row] = await tx<Row[]>`INSERT INTO limits
      (scope, api_key_id, user_id, kind, period, max, created_at, updated_at)
    VALUES (${limit.scope}, ${limit.scope === "key" ? subject : null},
      ${limit.scope === "user" ? subject : null}, ${limit.kind}, ${limit.period},
      ${limit.max}, ${now}, ${now})
    RETURNING *`;
  return toLimitRule(row);
}

/** The limits that apply to each of `requests`' keys (`ord`: the request's index), one statement. */
function applyingToEach(tx: postgres.TransactionSql, requests: readonly LimitLeaseRequest[]) {
  const owners = requests.map((r, i) => [i, r.apiKeyId, r.userId]);
  // FOR KEY SHARE: each limit's row is held before any of its counters is touched, so an
  // operator's delete (or a change that resets the counters), which locks the row first, is
  // ordered before or after the whole lease: no counter of a deleted limit (a foreign-key
  // failure), no counter locks taken in the cascade's order against the lease's (a deadlock). A
  // limit deleted while the lease waited is simply not returned.
  return tx<Row[]>`SELECT o.ord::int AS ord, l.* FROM (VALUES ${tx(owners)})
      AS o (ord, api_key_id, user_id)
    JOIN limits l ON (l.scope = 'key' AND l.api_key_id = o.api_key_id::bigint)
      OR (l.scope = 'user' AND l.user_id = o.user_id::bigint)
      OR (l.scope = 'default' AND NOT EXISTS (SELECT 1 FROM limits x
        WHERE x.scope = 'key' AND x.api_key_id = o.api_key_id::bigint AND x.kind = l.kind))
    ORDER BY o.ord::int, l.id
    FOR KEY SHARE OF l`;
}

/**
 * `leaseLimits`' reads and writes, in its transaction, for a whole batch in four statements:
 * the keys held and their rotation chains read (one more per hop of a rotated key's chain,
 * limit_chains.ts); the limits that apply to every key; the counters locked (created if missing)
 * in one order, limit id then subject, so that concurrent leases never deadlock, and read; the
 * new counters written. Requests sharing a counter (a user's limit) are planned one after the other, each
 * from what the one before it left.
 */
async function writeLeases(
  tx: postgres.TransactionSql,
  asked: readonly LimitLeaseRequest[],
): Promise<LimitSlice[][]> {
  const ends = await toLimitKeys(tx, asked.map((r) => r.apiKeyId), true);
  const requests = asked.map((r) => ({ ...r, apiKeyId: ends.get(r.apiKeyId) ?? r.apiKeyId }));
  const rulesOf: LimitRule[][] = requests.map(() => []);
  for (const row of await applyingToEach(tx, requests)) {
    rulesOf[row.ord as number].push(toLimitRule(row));
  }
  const counters = new Map<string, { limitId: number; subjectId: number }>();
  rulesOf.forEach((rules, i) => {
    for (const rule of rules) {
      const subjectId = toLimitSubject(rule, requests[i]);
      counters.set(`${rule.id}:${subjectId}`, { limitId: rule.id, subjectId });
    }
  });
  if (counters.size === 0) return rulesOf.map(() => []);
  const ordered = [...counters.values()]
    .sort((a, b) => a.limitId - b.limitId || a.subjectId - b.subjectId);
  // Locks every counter in that order (creating a missing one at window 0, which every window
  // after it replaces), and reads it: a concurrent lease of one of them waits here until this
  // one commits.
  const stored = new Map<string, StoredCounter>();
  for (const chunk of toChunks(ordered)) {
    const locked = await tx<Row[]>`INSERT INTO limit_usage ${
      tx(
        chunk.map((c) => ({
          limit_id: c.limitId,
          subject_id: c.subjectId,
          window_start: 0,
          used: 0,
        })),
        "limit_id",
        "subject_id",
        "window_start",
        "used",
      )
    }
      ON CONFLICT (limit_id, subject_id) DO UPDATE SET used = limit_usage.used
      RETURNING limit_id, subject_id, window_start, used, next_used, next_start`;
    for (const row of locked) stored.set(`${row.limit_id}:${row.subject_id}`, toStoredCounter(row));
  }
  const written = new Map<string, StoredCounter>();
  const slices = rulesOf.map((rules, i) =>
    rules.map((rule) => {
      const subjectId = toLimitSubject(rule, requests[i]);
      const id = `${rule.id}:${subjectId}`;
      const plan = planLease(rule, subjectId, stored.get(id), requests[i]);
      if (plan.write !== undefined) {
        stored.set(id, plan.write);
        written.set(id, plan.write);
      }
      return plan.slice;
    })
  );
  if (written.size > 0) await writeCounters(tx, written);
  return slices;
}

/** `listLimitUsage`'s reads. */
async function readUsage(
  sql: postgres.Sql | postgres.TransactionSql,
  owner: { apiKeyId?: number; userId: number },
  now: number,
): Promise<LimitUsage[]> {
  if (owner.apiKeyId !== undefined) {
    const ends = await toLimitKeys(sql, [owner.apiKeyId], false);
    owner = { ...owner, apiKeyId: ends.get(owner.apiKeyId) ?? owner.apiKeyId };
  }
  const rules =
    (owner.apiKeyId === undefined
      ? await sql<Row[]>`SELECT * FROM limits WHERE scope = 'user' AND user_id = ${owner.userId}
        ORDER BY id`
      : await applying(sql, { apiKeyId: owner.apiKeyId, userId: owner.userId })).map(
        toLimitRule,
      );
  const usage: LimitUsage[] = [];
  for (const rule of rules) {
    const subjectId = toLimitSubject(rule, { apiKeyId: owner.apiKeyId ?? 0, ...owner });
    const window = toLimitWindow(rule.period, now);
    const [row] = await sql<Row[]>`SELECT window_start, used, next_used, next_start FROM limit_usage
      WHERE limit_id = ${rule.id} AND subject_id = ${subjectId}`;
    // Units leased ahead for this window count in it.
    const used = toCounterAt(row && toStoredCounter(row), window)?.used ?? 0;
    usage.push({ rule, subjectId, window, used });
  }
  return usage;
}

export function createLimitStore(db: PgContext): LimitStore {
  return {
    async listLimits(filter = {}) {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM limits l WHERE true
          ${filter.scope === undefined ? sql`` : sql`AND l.scope = ${filter.scope}`}
          ${
          filter.subjectId === undefined
            ? sql``
            : sql`AND coalesce(l.api_key_id, l.user_id) = ${filter.subjectId}`
        }
          ORDER BY l.scope, coalesce(l.api_key_id, l.user_id, 0), l.kind, l.max`
      );
      return rows.map(toLimitRule);
    },

    putLimit(limit, change) {
      return db.write(
        (tx) => writeLimit(tx, limit, change.now),
        { audit: change.audit, ends: (rule) => scopeOf(rule) },
      );
    },

    deleteLimit(id, change) {
      return db.write(async (tx) => {
        const [row] = await tx<Row[]>`DELETE FROM limits WHERE id = ${id} RETURNING *`;
        return row && toLimitRule(row);
      }, { audit: change.audit, ends: (rule) => scopeOf(rule) });
    },

    leaseLimits(requests) {
      if (requests.length === 0) return Promise.resolve([]);
      // No audit and no grant ended: the transaction ends with its last write, without the
      // write path's ending statement. A batch without limits holds its keys' rows (FOR KEY
      // SHARE, which no write of a key but a rotation or deletion waits for) and writes nothing.
      return db.write((tx) => writeLeases(tx, requests), { recorded: () => undefined });
    },

    async returnLimitUnits(units) {
      if (units.length === 0) return;
      await db.write((tx) => writeReturns(tx, units), { ends: () => [] });
    },

    async listLimitUsage(owner, now) {
      return await db.read((sql) => readUsage(sql, owner, now));
    },
  };
}
