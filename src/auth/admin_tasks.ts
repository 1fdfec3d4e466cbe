/**
 * Admin tasks beyond users and keys, for the admin API and the admin CLI alike:
 * revoking one token by id, purging ended token rows, recording a database
 * restore, the failed-login counters (list, clear) and the dashboard's figures.
 * Like users.ts and keys.ts, each change is one atomic, audited store call.
 *
 * @module
 */
import type { CounterTotals } from "../platform/metrics.ts";
import type {
  ApiKeyListing,
  KeyQuery,
  LoginFailureListing,
  LoginFailureQuery,
  LoginFailures,
  Store,
} from "../store/store.ts";
import { findUnsafeCharacter } from "./account_rules.ts";
import { toUserRef } from "./audit.ts";
import { AuthError } from "./errors.ts";
import { type ChangeDeps, observeAudit, recordAudit, toAuditEntry } from "./changes.ts";
import { toOperatorClientSubject } from "./operators.ts";
import { toAccountSubject, toClientNetwork, toClientSubject } from "./throttle.ts";
import { deleteEndedTokensUntilNone } from "./janitor.ts";
import { findUserOrFail } from "./users.ts";

/** Revokes a token by id if it is not revoked yet; resolves to whether it was. */
export async function revokeTokenById(deps: ChangeDeps, tokenId: number): Promise<boolean> {
  const change = observeAudit(
    deps,
    (revoked: boolean) =>
      revoked ? toAuditEntry(deps, "token.revoked", `token:${tokenId}`) : undefined,
  );
  const revoked = await deps.store.revokeToken(tokenId, {
    now: deps.clock.now(),
    audit: change.audit,
  });
  change.notify();
  return revoked;
}

/**
 * Deletes every token row that stopped working by now (`token purge`), in the janitor's batches
 * of one transaction each, then audits the total as `tokens.purged`; resolves to how many rows
 * went.
 */
export async function purgeEndedTokens(deps: ChangeDeps): Promise<number> {
  const deleted = await deleteEndedTokensUntilNone(deps.store, deps.clock.now());
  await recordAudit(deps, "tokens.purged", "tokens", { deleted });
  return deleted;
}

/** What a restored database held, for its audit entry. */
export interface RestoredDatabase {
  /** The backup file it came from. */
  from: string;
  users: number;
  apiKeys: number;
  tokens: number;
}

/**
 * Records in the (restored) database that it was restored from a backup (`db restore`),
 * audited as `db.restored`.
 */
export async function recordDatabaseRestored(
  deps: ChangeDeps,
  restored: RestoredDatabase,
): Promise<void> {
  await recordAudit(deps, "db.restored", "database", {
    from: restored.from,
    users: restored.users,
    api_keys: restored.apiKeys,
    tokens: restored.tokens,
  });
}

/**
 * A page of API keys with their owner, by e-mail then id (see `KeyQuery`); with
 * `unusedSeconds`, only keys not revoked whose last use (or creation, if never used) is at
 * least that long before `now` (the admin API's `?unused=`).
 */
export function listKeys(
  store: Store,
  options: Omit<KeyQuery, "unusedSince"> & { now: number; unusedSeconds?: number },
): Promise<ApiKeyListing[]> {
  const { now: _, unusedSeconds, ...query } = options;
  return store.searchApiKeys({
    ...query,
    unusedSince: unusedSeconds === undefined ? undefined : options.now - unusedSeconds * 1000,
  });
}

/** A failed-login counter, with the API key it counts for when it is an account counter. */
export interface ThrottleCounter extends LoginFailureListing {
  /** Whether logins for the subject are refused now. */
  blocked: boolean;
}

/** A page of the live failed-login counters at `query.now`, the longest-blocked first. */
export async function listThrottleCounters(
  store: Store,
  query: LoginFailureQuery,
): Promise<ThrottleCounter[]> {
  return (await store.searchLoginFailures(query)).map((row) => ({
    ...row,
    blocked: row.blockedUntil > query.now,
  }));
}

/** A live failed-login counter and, for an account counter (`key:<id>`), its key. */
export interface CounterWithKey extends LoginFailures {
  key?: ApiKeyListing;
}

/** Every live failed-login counter at `now`, the longest-blocked first, with its key if any. */
export async function listAllThrottleCounters(
  store: Store,
  now: number,
): Promise<CounterWithKey[]> {
  const [keys, counters] = await Promise.all([store.listApiKeys(), store.listLoginFailures(now)]);
  const bySubject = new Map(keys.map((key) => [toAccountSubject(key.id), key]));
  return counters.map((row) => ({ ...row, key: bySubject.get(row.subject) }));
}

/** What {@link clearThrottle} forgot. */
export interface ClearedCounters {
  /** How many counters there were. */
  cleared: number;
  /** Whose: the user's e-mail, the address (IPv6: its /64), or the counter's subject. */
  target: string;
}

/** How the subjects that a `throttle clear` target names begin, besides `key:`. */
const ADDRESS_SUBJECT = /^(client|admin):(.+)$/;

/**
 * Forgets failed-login counters. `target` is a user's e-mail (the counters of
 * the user's API keys), a client address (IPv6: its /64; both of its counters,
 * `client:` for logins and `admin:` for operator sign-ins), or one counter's
 * subject as the counter list shows it (`client:ADDRESS`, `admin:ADDRESS`).
 * Audited as `throttle.cleared`, also when there was nothing to clear.
 *
 * @throws {AuthError} `not_found` for an e-mail no user has.
 */
export async function clearThrottle(deps: ChangeDeps, target: string): Promise<ClearedCounters> {
  // The target becomes the audit row's subject: no invisible or bidirectional text there.
  const unsafe = findUnsafeCharacter(target);
  if (unsafe !== undefined) {
    throw new AuthError(
      "invalid_request",
      `Invalid target: control, invisible and bidirectional characters are not allowed (found ${unsafe})`,
    );
  }
  let subject: string;
  let shown: string;
  let subjects: string[];
  const prefixed = ADDRESS_SUBJECT.exec(target.trim());
  if (prefixed !== null) {
    subject = prefixed[1] === "admin"
      ? toOperatorClientSubject(prefixed[2])
      : toClientSubject(prefixed[2]);
    shown = subject;
    subjects = [subject];
  } else if (target.includes("@")) {
    const user = await findUserOrFail(deps.store, target);
    subject = toUserRef(user.email);
    shown = user.email;
    subjects = (await deps.store.listApiKeys(user.id)).map((key) => toAccountSubject(key.id));
  } else {
    shown = toClientNetwork(target.trim());
    subject = `address:${shown}`.slice(0, 128);
    subjects = [toClientSubject(target.trim()), toOperatorClientSubject(target.trim())];
  }
  const change = observeAudit(
    deps,
    (n: number) => toAuditEntry(deps, "throttle.cleared", subject, { counters: n }),
  );
  const cleared = await deps.store.clearLoginFailures(subjects, {
    now: deps.clock.now(),
    audit: change.audit,
  });
  change.notify();
  return { cleared, target: shown };
}

/** The dashboard's figures at one instant. */
export interface AdminStats {
  at: number;
  users: number;
  apiKeys: number;
  liveTokens: number;
  /** Failed-login counters that refuse logins now. */
  throttledSubjects: number;
  /** The metrics' running totals since this process started. */
  counters: CounterTotals;
}

/** What {@link readAdminStats} needs. */
export interface StatsDeps {
  store: Store;
  now: number;
  readCounters(): Promise<CounterTotals>;
}

/** Reads the dashboard's figures: row counts, live tokens, blocked counters, metric totals. */
export async function readAdminStats(deps: StatsDeps): Promise<AdminStats> {
  const { store, now } = deps;
  // Aggregates in the database: the work does not grow with the rows a page would list.
  const [users, apiKeys, liveTokens, throttledSubjects, counters] = await Promise.all([
    store.countRows("users"),
    store.countRows("api_keys"),
    store.countLiveTokens(now),
    store.countBlockedSubjects(now),
    deps.readCounters(),
  ]);
  return {
    at: now,
    users,
    apiKeys,
    liveTokens,
    throttledSubjects,
    counters,
  };
}
