/**
 * The limits and limit_usage tables: limits as operators set them, and each limit's counter of
 * units leased in its current window (src/store/store_limits.ts).
 *
 * @module
 */
import { StoreConflict } from "../errors.ts";
import {
  planLease,
  planReturn,
  type StoredCounter,
  toCounterAt,
  TooLongChain,
} from "../limit_lease.ts";
import { toLimitRule, toStoredCounter } from "../rows.ts";
import type {
  LimitLeaseRequest,
  LimitRule,
  LimitSlice,
  LimitStore,
  LimitUsage,
  NewLimit,
} from "../store.ts";
import {
  type LimitPeriod,
  MAX_CHAIN_WALK,
  toLimitSubject,
  toLimitWindow,
} from "../store_limits.ts";
import type { Connection, Row } from "./connection.ts";

/** The limits that apply to a key: its own, the default for the kinds it has none of, its user's. */
const APPLYING = `
  (l.scope = 'key' AND l.api_key_id = :api_key_id)
  OR (l.scope = 'user' AND l.user_id = :user_id)
  OR (l.scope = 'default' AND NOT EXISTS (
    SELECT 1 FROM limits o WHERE o.scope = 'key' AND o.api_key_id = :api_key_id AND o.kind = l.kind))`;

const ORDER = "ORDER BY l.scope, coalesce(l.api_key_id, l.user_id, 0), l.kind, l.max";

/** The prepared statements of the limits group. */
function prepareLimitStatements(conn: Connection) {
  const { sql } = conn;
  return {
    listAll: sql(`SELECT * FROM limits l ${ORDER}`),
    listScope: sql(`SELECT * FROM limits l WHERE l.scope = :scope ${ORDER}`),
    listSubject: sql(
      `SELECT * FROM limits l WHERE l.scope = :scope
         AND coalesce(l.api_key_id, l.user_id) = :subject_id ${ORDER}`,
    ),
    applying: sql(`SELECT * FROM limits l WHERE ${APPLYING} ORDER BY l.id`),
    ofUser: sql(`SELECT * FROM limits l WHERE l.scope = 'user' AND l.user_id = :user_id
      ORDER BY l.id`),
    findSame: sql(
      `SELECT * FROM limits WHERE scope = :scope AND coalesce(api_key_id, user_id, 0) = :subject
         AND kind = :kind AND (kind = 'quota' OR period = :period)`,
    ),
    update: sql(
      `UPDATE limits SET max = :max, period = :period, updated_at = :now WHERE id = :id RETURNING *`,
    ),
    resetCounters: sql("DELETE FROM limit_usage WHERE limit_id = :id", "keeps-grants"),
    insert: sql(
      `INSERT INTO limits (scope, api_key_id, user_id, kind, period, max, created_at, updated_at)
       VALUES (:scope, :api_key_id, :user_id, :kind, :period, :max, :now, :now) RETURNING *`,
    ),
    remove: sql("DELETE FROM limits WHERE id = :id RETURNING *"),
    counter: sql(
      `SELECT window_start, used, next_used, next_start FROM limit_usage
       WHERE limit_id = :limit_id AND subject_id = :subject_id`,
    ),
    counterOfReturn: sql(
      `SELECT u.window_start, u.used, u.next_used, u.next_start, l.period FROM limit_usage u
       JOIN limits l ON l.id = u.limit_id
       WHERE u.limit_id = :limit_id AND u.subject_id = :subject_id`,
    ),
    // Keeps grants: counters are bookkeeping, never part of a grant.
    counterWrite: sql(
      `INSERT INTO limit_usage (limit_id, subject_id, window_start, used, next_used, next_start)
       VALUES (:limit_id, :subject_id, :window_start, :used, :next_used, :next_start)
       ON CONFLICT (limit_id, subject_id) DO UPDATE SET window_start = excluded.window_start,
         used = excluded.used, next_used = excluded.next_used, next_start = excluded.next_start`,
      "keeps-grants",
    ),
    keyOf: sql("SELECT replaced_by FROM api_keys WHERE id = :id"),
    scopeOfLimit: sql("SELECT scope FROM limits WHERE id = :id"),
    userExists: sql("SELECT 1 AS ok FROM users WHERE id = :id"),
  };
}

type LimitStatements = ReturnType<typeof prepareLimitStatements>;

/**
 * The key whose limits and counters a key uses: the last of its rotation chain (a rotation moves
 * them to the successor, docs/architecture.md), the key itself if it was never rotated or is
 * unknown. A key more than {@link MAX_CHAIN_WALK} rotations behind (made by hand) fails a lease
 * (`strict`) rather than count against another chain's limits; a report or a return then uses the
 * key itself (a return to a counter that moved on finds none).
 *
 * @throws {StoreError} with `strict`, for a chain that long.
 */
function toLimitKey(statements: LimitStatements, apiKeyId: number, strict: boolean): number {
  let id = apiKeyId;
  for (let hop = 0;; hop++) {
    const row = statements.keyOf.get({ id }) as Row | undefined;
    if (row?.replaced_by == null) return id;
    if (hop === MAX_CHAIN_WALK) break;
    id = row.replaced_by as number;
  }
  if (strict) throw new TooLongChain(apiKeyId);
  return apiKeyId;
}

function readCounter(statements: LimitStatements, limitId: number, subjectId: number) {
  const row = statements.counter.get({ limit_id: limitId, subject_id: subjectId }) as
    | Row
    | undefined;
  return row && toStoredCounter(row);
}

function writeCounter(
  statements: LimitStatements,
  limitId: number,
  subjectId: number,
  counter: StoredCounter,
): void {
  statements.counterWrite.run({
    limit_id: limitId,
    subject_id: subjectId,
    window_start: counter.windowStart,
    used: counter.used,
    next_used: counter.nextUsed,
    next_start: counter.nextStart,
  });
}

/** `putLimit`'s writes, in its transaction. */
function writeLimit(statements: LimitStatements, limit: NewLimit, now: number): LimitRule {
  const subject = limit.subjectId ?? 0;
  if (limit.scope === "key") {
    const key = statements.keyOf.get({ id: subject }) as Row | undefined;
    if (key === undefined) throw new StoreConflict(`No key ${subject} to limit`);
    // Its limits are its successor's (moved by the rotation): one set here would never apply.
    if (key.replaced_by != null) throw new StoreConflict(`Key ${subject} was rotated`);
  } else if (limit.scope === "user" && !statements.userExists.get({ id: subject })) {
    throw new StoreConflict(`No user ${subject} to limit`);
  }
  const same = statements.findSame.get({
    scope: limit.scope,
    subject,
    kind: limit.kind,
    period: limit.period,
  }) as Row | undefined;
  if (same !== undefined) {
    // A quota whose refill period changes starts counting afresh.
    if (same.period !== limit.period) statements.resetCounters.run({ id: same.id as number });
    return toLimitRule(
      statements.update.get({
        id: same.id as number,
        max: limit.max,
        period: limit.period,
        now,
      }) as Row,
    );
  }
  return toLimitRule(statements.insert.get({
    scope: limit.scope,
    api_key_id: limit.scope === "key" ? subject : null,
    user_id: limit.scope === "user" ? subject : null,
    kind: limit.kind,
    period: limit.period,
    max: limit.max,
    now,
  }) as Row);
}

/** `leaseLimits`' reads and writes, in its transaction. */
function writeLease(statements: LimitStatements, request: LimitLeaseRequest): LimitSlice[] {
  const owner = {
    apiKeyId: toLimitKey(statements, request.apiKeyId, true),
    userId: request.userId,
  };
  const rules = (statements.applying.all({
    api_key_id: owner.apiKeyId,
    user_id: owner.userId,
  }) as Row[]).map(toLimitRule);
  return rules.map((rule) => {
    const subjectId = toLimitSubject(rule, owner);
    const stored = readCounter(statements, rule.id, subjectId);
    const plan = planLease(rule, subjectId, stored, request);
    if (plan.write !== undefined) writeCounter(statements, rule.id, subjectId, plan.write);
    return plan.slice;
  });
}

/** `listLimitUsage`'s reads, in its snapshot. */
function readUsage(
  statements: LimitStatements,
  owner: { apiKeyId?: number; userId: number },
  now: number,
): LimitUsage[] {
  const apiKeyId = owner.apiKeyId === undefined ? 0 : toLimitKey(statements, owner.apiKeyId, false);
  const rows = owner.apiKeyId === undefined
    ? statements.ofUser.all({ user_id: owner.userId })
    : statements.applying.all({ api_key_id: apiKeyId, user_id: owner.userId });
  return (rows as Row[]).map(toLimitRule).map((rule): LimitUsage => {
    const subjectId = toLimitSubject(rule, { apiKeyId, userId: owner.userId });
    const window = toLimitWindow(rule.period, now);
    const stored = readCounter(statements, rule.id, subjectId);
    // Units leased ahead for this window count in it.
    const used = toCounterAt(stored, window)?.used ?? 0;
    return { rule, subjectId, window, used };
  });
}

export function createLimitStore(conn: Connection): LimitStore {
  const statements = prepareLimitStatements(conn);
  const { listAll, listScope, listSubject, applying, remove, counterOfReturn, scopeOfLimit } =
    statements;

  return {
    listLimits(filter = {}) {
      return conn.read(() => {
        const rows = filter.scope === undefined
          ? listAll.all()
          : filter.subjectId === undefined
          ? listScope.all({ scope: filter.scope })
          : listSubject.all({ scope: filter.scope, subject_id: filter.subjectId });
        return (rows as Row[]).map(toLimitRule);
      });
    },

    putLimit(limit, { now, audit }) {
      return conn.write(() => writeLimit(statements, limit, now), audit);
    },

    deleteLimit(id, { audit }) {
      return conn.write(() => {
        const row = remove.get({ id }) as Row | undefined;
        return row && toLimitRule(row);
      }, audit);
    },

    async leaseLimits(requests) {
      // Keys without limits are answered by a read: no write lock is taken for them.
      const limited = await conn.read(() =>
        requests.map((r) =>
          applying.get({
            api_key_id: toLimitKey(statements, r.apiKeyId, true),
            user_id: r.userId,
          }) !== undefined
        )
      );
      if (!limited.includes(true)) return requests.map(() => []);
      // One transaction for the batch; a later request reads the counters an earlier one wrote.
      return await conn.write(() =>
        requests.map((request, i) => limited[i] ? writeLease(statements, request) : [])
      );
    },

    async returnLimitUnits(units) {
      if (units.length === 0) return;
      await conn.write(() => {
        for (const unit of units) {
          // Units of a key rotated since they were leased go back to the counter the rotation
          // moved to its successor.
          const scope = scopeOfLimit.get({ id: unit.limitId }) as Row | undefined;
          const subjectId = scope?.scope === "user"
            ? unit.subjectId
            : toLimitKey(statements, unit.subjectId, false);
          const key = { limit_id: unit.limitId, subject_id: subjectId };
          const row = counterOfReturn.get(key) as Row | undefined;
          if (row === undefined) continue;
          const write = planReturn(row.period as LimitPeriod, toStoredCounter(row), unit);
          if (write !== undefined) writeCounter(statements, unit.limitId, subjectId, write);
        }
      });
    },

    listLimitUsage(owner, now) {
      return conn.read(() => readUsage(statements, owner, now));
    },
  };
}
