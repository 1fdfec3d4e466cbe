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
import { type CounterPlan, planLease, type StoredCounter } from "../limit_lease.ts";
import { type Row, toLimitRule } from "../rows.ts";
import type {
  GrantScope,
  LimitLeaseRequest,
  LimitRule,
  LimitSlice,
  LimitStore,
  LimitUsage,
  NewLimit,
} from "../store.ts";
import { toLimitSubject, toLimitWindow } from "../store_limits.ts";
import type { PgContext } from "./db.ts";

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

const toCounter = (row: Row): StoredCounter => ({
  windowStart: row.window_start as number,
  used: row.used as number,
});

/** `putLimit`'s reads and writes, in its transaction. */
async function writeLimit(
  tx: postgres.TransactionSql,
  limit: NewLimit,
  now: number,
): Promise<LimitRule> {
  const subject = limit.subjectId ?? 0;
  if (limit.scope !== "default") {
    const table = limit.scope === "key" ? tx`api_keys` : tx`users`;
    const found = await tx`SELECT 1 FROM ${table} WHERE id = ${subject} FOR KEY SHARE`;
    if (found.length === 0) throw new StoreConflict(`No ${limit.scope} ${subject} to limit`);
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

/** `leaseLimits`' reads and writes, in its transaction. */
async function writeLease(
  tx: postgres.TransactionSql,
  request: LimitLeaseRequest,
): Promise<LimitSlice[]> {
  const rules = (await applying(tx, request)).map(toLimitRule);
  if (rules.length === 0) return [];
  const targets = rules
    .map((rule) => ({ rule, subjectId: toLimitSubject(rule, request) }))
    .sort((a, b) => a.rule.id - b.rule.id || a.subjectId - b.subjectId);
  // Locks every counter in that order (creating the missing ones), and reads it: a
  // concurrent lease of the same counter waits here until this one commits.
  const locked = await tx<Row[]>`INSERT INTO limit_usage ${
    tx(
      targets.map((t) => ({
        limit_id: t.rule.id,
        subject_id: t.subjectId,
        window_start: toLimitWindow(t.rule.period, request.now).start,
        used: 0,
      })),
      "limit_id",
      "subject_id",
      "window_start",
      "used",
    )
  }
    ON CONFLICT (limit_id, subject_id) DO UPDATE SET used = limit_usage.used
    RETURNING limit_id, subject_id, window_start, used`;
  const stored = new Map(locked.map((row) => [`${row.limit_id}:${row.subject_id}`, row]));
  const plans: CounterPlan[] = targets.map(({ rule, subjectId }) => {
    const row = stored.get(`${rule.id}:${subjectId}`);
    return planLease(rule, subjectId, row && toCounter(row), request);
  });
  for (const plan of plans) {
    if (plan.write === undefined) continue;
    await tx`UPDATE limit_usage SET window_start = ${plan.write.windowStart},
        used = ${plan.write.used}
      WHERE limit_id = ${plan.slice.rule.id} AND subject_id = ${plan.slice.subjectId}`;
  }
  return plans.map((plan) => plan.slice);
}

/** `listLimitUsage`'s reads. */
async function readUsage(
  sql: postgres.Sql | postgres.TransactionSql,
  owner: { apiKeyId?: number; userId: number },
  now: number,
): Promise<LimitUsage[]> {
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
    const [row] = await sql<Row[]>`SELECT window_start, used FROM limit_usage
      WHERE limit_id = ${rule.id} AND subject_id = ${subjectId}`;
    const used = row !== undefined && row.window_start === window.start ? row.used as number : 0;
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

    async leaseLimits(request) {
      // A key without limits is answered by a read: no transaction, no row locked.
      if ((await db.read((sql) => applying(sql, request))).length === 0) return [];
      return await db.write((tx) => writeLease(tx, request), { ends: () => [] });
    },

    async returnLimitUnits(units) {
      if (units.length === 0) return;
      const sorted = [...units].sort((a, b) => a.limitId - b.limitId || a.subjectId - b.subjectId);
      await db.write(async (tx) => {
        for (const unit of sorted) {
          await tx`UPDATE limit_usage SET used = greatest(used - ${unit.units}, 0)
            WHERE limit_id = ${unit.limitId} AND subject_id = ${unit.subjectId}
              AND window_start = ${unit.windowStart}`;
        }
      }, { ends: () => [] });
    },

    async listLimitUsage(owner, now) {
      return await db.read((sql) => readUsage(sql, owner, now));
    },
  };
}
