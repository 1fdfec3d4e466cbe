/**
 * Limits as operators set them: rates (requests per second, minute, hour or day; several may
 * apply) and a quota (a total, refilled each hour, day or calendar month, or never), per API
 * key, per user (shared by all its keys) or the default (for keys without their own of that
 * kind). Each change is one atomic, audited store call; the limiter (limiter.ts) enforces them.
 * The CLI, the admin API and the console call these functions.
 *
 * @module
 */
import type {
  ApiKey,
  LimitKind,
  LimitPeriod,
  LimitRule,
  LimitUsage,
  Store,
  User,
} from "../store/store.ts";
import { StoreConflict } from "../store/errors.ts";
import { MAX_CHAIN_WALK } from "../store/store_limits.ts";
import { toKeyRef, toUserRef } from "./audit.ts";
import { type ChangeDeps, observeAudit, toAuditEntry } from "./changes.ts";
import { AuthError } from "./errors.ts";

/** The largest limit: a trillion requests per window. */
export const MAX_LIMIT = 1_000_000_000_000;

/** The periods of each kind. */
export const KIND_PERIODS: Readonly<Record<LimitKind, readonly LimitPeriod[]>> = {
  rate: ["second", "minute", "hour", "day"],
  quota: ["hour", "day", "month", "none"],
};

/** Whose limit: a key, a user (all its keys), or the default. */
export type LimitTarget =
  | { scope: "key"; key: Pick<ApiKey, "id"> }
  | { scope: "user"; user: Pick<User, "id" | "email"> }
  | { scope: "default" };

/** A limit's value: how many requests per which period. */
export interface LimitValue {
  kind: LimitKind;
  max: number;
  period: LimitPeriod;
}

const PERIOD_WORDS: Readonly<Record<string, LimitPeriod>> = {
  s: "second",
  sec: "second",
  second: "second",
  m: "minute",
  min: "minute",
  minute: "minute",
  h: "hour",
  hour: "hour",
  d: "day",
  day: "day",
  month: "month",
  mo: "month",
};

/**
 * Reads a limit as written: `RATE/PERIOD` for a rate (`10/second`, `5000/day`), `TOTAL/PERIOD`
 * or `TOTAL` (never refilled) for a quota (`100000/month`). Digits may be grouped with `_` or `,`.
 *
 * @throws {AuthError} `invalid_request` naming what is wrong.
 */
export function parseLimitValue(kind: LimitKind, text: string): LimitValue {
  const match = /^\s*([0-9][0-9_,]*)\s*(?:\/\s*([a-z]+)\s*)?$/i.exec(text);
  const periods = KIND_PERIODS[kind];
  const usage = kind === "rate"
    ? "expected COUNT/PERIOD, PERIOD one of second, minute, hour, day"
    : "expected COUNT or COUNT/PERIOD, PERIOD one of hour, day, month";
  if (match === null) throw new AuthError("invalid_request", `Invalid ${kind} "${text}": ${usage}`);
  const max = Number(match[1].replaceAll(/[_,]/g, ""));
  const period = match[2] === undefined
    ? (kind === "quota" ? "none" : undefined)
    : PERIOD_WORDS[match[2].toLowerCase()];
  if (period === undefined || !periods.includes(period)) {
    throw new AuthError("invalid_request", `Invalid ${kind} "${text}": ${usage}`);
  }
  return checkLimitValue({ kind, max, period });
}

/** @throws {AuthError} `invalid_request` for a count or period a kind cannot have. */
export function checkLimitValue(value: LimitValue): LimitValue {
  if (!Number.isSafeInteger(value.max) || value.max < 0 || value.max > MAX_LIMIT) {
    throw new AuthError(
      "invalid_request",
      `Invalid ${value.kind}: the count must be a whole number from 0 to ${MAX_LIMIT}`,
    );
  }
  if (!KIND_PERIODS[value.kind]?.includes(value.period)) {
    throw new AuthError(
      "invalid_request",
      `Invalid ${value.kind} period "${value.period}": expected one of ${
        KIND_PERIODS[value.kind]?.join(", ") ?? "rate, quota"
      }`,
    );
  }
  return value;
}

/** A limit written back as {@link parseLimitValue} reads it. */
export function formatLimitValue(value: Pick<LimitValue, "max" | "period">): string {
  return value.period === "none" ? String(value.max) : `${value.max}/${value.period}`;
}

function subjectOf(target: LimitTarget): { subjectId: number | null; ref: string } {
  if (target.scope === "key") return { subjectId: target.key.id, ref: toKeyRef(target.key.id) };
  if (target.scope === "user") {
    return { subjectId: target.user.id, ref: toUserRef(target.user.email) };
  }
  return { subjectId: null, ref: "limits:default" };
}

/**
 * Sets a limit of a key, a user or the default: a rate of the same period, or the quota, is
 * replaced (a rate's counter stays; a quota whose period changes starts afresh).
 *
 * @throws {AuthError} `invalid_request` for a value out of bounds; `not_found` when the key or
 * user went meanwhile; `conflict` for a rotated key (its limits are its successor's).
 */
export async function setLimit(
  deps: ChangeDeps,
  target: LimitTarget,
  value: LimitValue,
): Promise<LimitRule> {
  const { kind, max, period } = checkLimitValue(value);
  const { subjectId, ref } = subjectOf(target);
  const change = observeAudit(
    deps,
    (rule: LimitRule) =>
      toAuditEntry(deps, "limit.set", ref, { limit_id: rule.id, kind, max, period }),
  );
  try {
    const rule = await deps.store.putLimit(
      { scope: target.scope, subjectId, kind, max, period },
      { now: deps.clock.now(), audit: change.audit },
    );
    change.notify();
    return rule;
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    // The store refuses a rotated key's limit (they are its successor's), and one gone.
    const last = await findRotatedTo(deps.store, target);
    if (last !== undefined) throw rotatedError(subjectId!, last);
    throw new AuthError("not_found", `Cannot set the limit: ${ref} does not exist`);
  }
}

/**
 * A rotated key's limits are its successor's: the rotation moved them, with what their windows
 * have used, and the old key counts against them until it ends (docs/architecture.md).
 */
function rotatedError(keyId: number, lastId: number): AuthError {
  return new AuthError(
    "conflict",
    `Cannot set the limit: API key ${keyId} was rotated; its limits are its successor's ` +
      `(key ${lastId}): set them there`,
  );
}

/**
 * For a rotated key, the last key of its rotation chain: the one whose limits it uses, and the
 * only one of the chain whose limits can be set. `undefined` for a key not rotated (or gone), a
 * user or the default.
 */
async function findRotatedTo(
  store: Pick<Store, "findApiKeyById">,
  target: LimitTarget,
): Promise<number | undefined> {
  if (target.scope !== "key") return undefined;
  let last = (await store.findApiKeyById(target.key.id))?.replacedBy ?? null;
  if (last === null) return undefined;
  for (let hop = 0; hop < MAX_CHAIN_WALK; hop++) {
    const next: number | null = (await store.findApiKeyById(last))?.replacedBy ?? null;
    if (next === null) break;
    last = next;
  }
  return last;
}

/** For a rotated key, where its limits are now: `: it was rotated, …`; else nothing. */
async function toRotatedNote(store: Store, target: LimitTarget): Promise<string> {
  const last = await findRotatedTo(store, target);
  return last === undefined
    ? ""
    : `: it was rotated, and its limits are its successor's (key ${last})`;
}

/**
 * Removes a limit: a rate by its period, or the quota (any period).
 *
 * @throws {AuthError} `not_found` when there is no such limit.
 */
export async function removeLimit(
  deps: ChangeDeps,
  target: LimitTarget,
  which: { kind: LimitKind; period?: LimitPeriod },
): Promise<LimitRule> {
  const { subjectId, ref } = subjectOf(target);
  const rules = await deps.store.listLimits(
    subjectId === null ? { scope: target.scope } : { scope: target.scope, subjectId },
  );
  const rule = rules.find((r) =>
    r.kind === which.kind && (which.kind === "quota" || r.period === which.period)
  );
  const what = which.kind === "quota" ? "quota" : `${which.period ?? "?"} rate`;
  if (rule === undefined) {
    throw new AuthError(
      "not_found",
      `No ${what} limit on ${ref}${await toRotatedNote(deps.store, target)}`,
    );
  }
  const change = observeAudit(
    deps,
    (removed: LimitRule | undefined) =>
      removed &&
      toAuditEntry(deps, "limit.removed", ref, {
        limit_id: removed.id,
        kind: removed.kind,
        max: removed.max,
        period: removed.period,
      }),
  );
  const removed = await deps.store.deleteLimit(rule.id, {
    now: deps.clock.now(),
    audit: change.audit,
  });
  if (removed === undefined) throw new AuthError("not_found", `No ${what} limit on ${ref}`);
  change.notify();
  return removed;
}

/**
 * A key's own limits, a user's, or the default's (none: every limit). A rotated key's are its
 * chain's last key's (the rotation moved them there), listed under that key.
 */
export async function listLimitsOf(store: Store, target?: LimitTarget): Promise<LimitRule[]> {
  if (target === undefined) return await store.listLimits();
  if (target.scope === "key") return (await listKeyLimits(store, target.key)).rules;
  const { subjectId } = subjectOf(target);
  return await store.listLimits(
    subjectId === null ? { scope: target.scope } : { scope: target.scope, subjectId },
  );
}

/** A limit in force and what is left of its current window. */
export interface LimitReport extends LimitUsage {
  remaining: number;
}

/**
 * The limits in force for a key (its own, else the default's, and its user's) or a user's own,
 * with their current window's use: units leased by servers (spent, or held unspent for at most
 * about a second) and what is left.
 */
export async function readLimitUsage(
  store: Store,
  now: number,
  owner: { apiKeyId?: number; userId: number },
): Promise<LimitReport[]> {
  const usage = await store.listLimitUsage(owner, now);
  return usage.map((u) => ({ ...u, remaining: Math.max(0, u.rule.max - u.used) }));
}

/**
 * A key's own limits ({@link listLimitsOf}) and, for a rotated key, the key they are now
 * (`countsAgainst`, as {@link KeyLimitReport} has it): its chain's last, whose rules these are.
 */
export async function listKeyLimits(
  store: Store,
  key: Pick<ApiKey, "id">,
): Promise<{ countsAgainst: number | undefined; rules: LimitRule[] }> {
  const countsAgainst = await findRotatedTo(store, { scope: "key", key });
  const rules = await store.listLimits({ scope: "key", subjectId: countsAgainst ?? key.id });
  return { countsAgainst, rules };
}

/** What {@link readKeyLimitUsage} answers: the limits in force and, for a rotated key, whose. */
export interface KeyLimitReport {
  /**
   * For a rotated key, the last key of its rotation chain: the rotation moved the key's limits
   * and counters there, and the key counts against them until it ends. `undefined` otherwise.
   */
  countsAgainst: number | undefined;
  limits: LimitReport[];
}

/**
 * The limits in force for an API key with what is left of them ({@link readLimitUsage}), and,
 * for a rotated key, which key's limits those are.
 */
export async function readKeyLimitUsage(
  store: Store,
  now: number,
  key: Pick<ApiKey, "id" | "userId">,
): Promise<KeyLimitReport> {
  const [countsAgainst, limits] = await Promise.all([
    findRotatedTo(store, { scope: "key", key }),
    readLimitUsage(store, now, { apiKeyId: key.id, userId: key.userId }),
  ]);
  return { countsAgainst, limits };
}

/**
 * Removes a limit by its id.
 *
 * @throws {AuthError} `not_found` when there is no such limit.
 */
export async function removeLimitById(deps: ChangeDeps, id: number): Promise<LimitRule> {
  const rule = (await deps.store.listLimits()).find((r) => r.id === id);
  if (rule === undefined) throw new AuthError("not_found", `No limit ${id}`);
  const ref = rule.scope === "default"
    ? "limits:default"
    : rule.scope === "key"
    ? toKeyRef(rule.subjectId!)
    : toUserRef((await deps.store.findUserById(rule.subjectId!))?.email ?? String(rule.subjectId));
  const change = observeAudit(
    deps,
    (removed: LimitRule | undefined) =>
      removed &&
      toAuditEntry(deps, "limit.removed", ref, {
        limit_id: removed.id,
        kind: removed.kind,
        max: removed.max,
        period: removed.period,
      }),
  );
  const removed = await deps.store.deleteLimit(id, { now: deps.clock.now(), audit: change.audit });
  if (removed === undefined) throw new AuthError("not_found", `No limit ${id}`);
  change.notify();
  return removed;
}
