/**
 * Which audit rows a deleted user's anonymization rewrites ({@link AuditAnonymizing}), for both
 * backends. It goes by the user, not by an address alone: an address may have had another
 * holder before the user, or have one after it (a freed address taken by a new sign-up), and
 * their rows stay as they are.
 *
 * The backend walks back from the user's current e-mail: each address was the user's from the
 * row that started its hold (the user's creation, or the rename or e-mail change that moved the
 * user to it: the latest such row before the hold ended) until the row that moved the user away
 * (or now). Audit row ids, not times, bound the holds: ids follow the order of the commits,
 * where two rows may share a millisecond.
 *
 * The rows of a hold are read through indexes, never by a scan of the log since the user's first
 * row: those whose subject is `user:<address>` (the subject index), and among the actions of
 * {@link AUDIT_ADDRESS_DETAIL_ACTIONS} alone (the action index) those whose detail holds the
 * quoted address; the user's own rows by its actor (the actor index).
 *
 * Then, in one pass over the rows found ({@link planAuditRewrites}):
 * - a row whose subject is `user:<address>` within the user's hold of it takes the opaque id as
 *   subject, and every address in its detail is replaced by the id (the `to` of an e-mail
 *   change asked, too: never followed, as it may be another user's);
 * - a row written by the user (actor `portal:user:<id>`, from its first hold on) has every
 *   address in its detail replaced;
 * - any other row (`key.created` and `token.revoked` name the user in `detail.user`) has the
 *   user's addresses replaced where they fall within the user's hold of them.
 *
 * @module
 */

/** The actions whose `from` is the user's own former e-mail, moved to the row's subject. */
const RENAMES: ReadonlySet<string> = new Set(["user.renamed", "portal.email_changed"]);

/** The actions that start a user's hold of an address: its creation, or a move to it. */
export const AUDIT_HOLD_STARTS: readonly string[] = [
  "user.added",
  "portal.signed_up",
  ...RENAMES,
];

/**
 * Every action whose entries may hold an address in their `detail`, which the walk searches for
 * the user's addresses beside the rows that name them as subject. An entry that writes an address
 * into its detail under an action missing here keeps that address after a deletion (unless its
 * subject or actor is the user's): tests/store/audit_anonymize_test.ts reads the source's audit
 * entries and drives each path that writes one, and fails if one is missing.
 * - `key.created`: `detail.user`, the key's user (src/auth/keys.ts: an operator's key, a rotation,
 *   a portal user's own key);
 * - `token.revoked`: `detail.user`, the token's user (src/auth/revocation.ts: a token revoked
 *   with its own key; src/auth/portal/own_keys.ts);
 * - `user.renamed`: `detail.from`, the user's former address (src/auth/users.ts);
 * - `portal.email_change_requested`: `detail.to`, the address asked for
 *   (src/auth/portal/own_account.ts);
 * - `portal.email_changed`: `detail.from`, the former address (src/auth/portal/own_account.ts).
 */
export const AUDIT_ADDRESS_DETAIL_ACTIONS: readonly string[] = [
  "key.created",
  "token.revoked",
  "user.renamed",
  "portal.email_change_requested",
  "portal.email_changed",
];

/** The highest audit row id the walk starts below (no row has it). */
const AUDIT_ID_END = Number.MAX_SAFE_INTEGER;

/** At most this many holds are followed back (a user renamed more often keeps older rows). */
const MAX_ADDRESS_HOLDS = 1000;

/** The audit rows with ids in `[fromId, untilId)` are the user's under `address`. */
export interface AddressHold {
  address: string;
  fromId: number;
  untilId: number;
}

/** The row that started a hold ({@link AUDIT_HOLD_STARTS}), as the backend read it. */
export interface HoldStart {
  id: number;
  action: string;
  detail: Readonly<Record<string, unknown>>;
}

/**
 * One step of the walk back: the hold of `address` that ended at `untilId`, started by `start`
 * (`undefined` when no such row is left: retention pruned it; the hold then reaches back to
 * the first row), and the address the user held before it, if `start` moved the user.
 */
function toAddressHold(
  address: string,
  untilId: number,
  start: HoldStart | undefined,
): { hold: AddressHold; before?: { address: string; untilId: number } } {
  const hold = { address, fromId: start?.id ?? 0, untilId };
  const from = start === undefined || !RENAMES.has(start.action) ? undefined : start.detail.from;
  return typeof from === "string" && from !== address
    ? { hold, before: { address: from, untilId: start!.id } }
    : { hold };
}

/** An audit row as the backend read it. */
export interface AuditRowRead {
  id: number;
  actor: string;
  subject: string;
  detail: Readonly<Record<string, unknown>>;
}

/** What to write back: the row's new subject and detail. */
export interface AuditRewrite {
  id: number;
  subject: string;
  detail: Record<string, unknown>;
}

/** The rewrites of one deletion, the rows that took the id as subject, the addresses replaced. */
export interface AuditRewritePlan {
  rewrites: AuditRewrite[];
  renamed: number;
  addresses: string[];
}

function isHeld(holds: readonly AddressHold[], address: string, id: number): boolean {
  return holds.some((hold) => hold.address === address && id >= hold.fromId && id < hold.untilId);
}

/** Whether a detail value is an address (what the trigger lets become the id). */
function isAddress(value: unknown): value is string {
  return typeof value === "string" && value.includes("@");
}

/**
 * The rewrites of `rows` (any rows; those the rules of the @module leave alone are skipped) for
 * the user with these `holds` and `actor`, to the opaque `ref`.
 */
export function planAuditRewrites(
  rows: readonly AuditRowRead[],
  options: { holds: readonly AddressHold[]; actor?: string; ref: string },
): AuditRewritePlan {
  const { holds, actor, ref } = options;
  const firstId = Math.min(...holds.map((hold) => hold.fromId));
  const rewrites: AuditRewrite[] = [];
  const addresses = new Set<string>(holds.map((hold) => hold.address));
  let renamed = 0;
  for (const row of rows) {
    const own = row.subject.startsWith("user:") && isHeld(holds, row.subject.slice(5), row.id);
    const mine = own || (actor !== undefined && row.actor === actor && row.id >= firstId);
    const detail: Record<string, unknown> = {};
    let changed = own;
    for (const [key, value] of Object.entries(row.detail)) {
      if (isAddress(value) && (mine || isHeld(holds, value, row.id))) {
        detail[key] = ref;
        addresses.add(value);
        changed = true;
      } else {
        detail[key] = value;
      }
    }
    if (!changed) continue;
    if (own) renamed++;
    rewrites.push({ id: row.id, subject: own ? ref : row.subject, detail });
  }
  return { rewrites, renamed, addresses: [...addresses] };
}

/** A read the walk ({@link walkAuditRows}) asks its backend for. */
export type AuditRowQuery =
  /** The latest row before `untilId` with subject `user:<address>` that started a hold. */
  | { kind: "hold_start"; address: string; untilId: number }
  /** The rows of a hold with subject `user:<address>`. */
  | { kind: "subject_rows"; hold: AddressHold }
  /** The rows of a hold whose action is one of `actions` and whose detail quotes the address. */
  | { kind: "detail_rows"; hold: AddressHold; actions: readonly string[] }
  /** The rows by `actor` from `fromId` on. */
  | { kind: "actor_rows"; fromId: number; actor: string };

/** What the backend answers a {@link AuditRowQuery}: a hold's start, or rows. */
export type AuditRowAnswer = HoldStart | undefined | readonly AuditRowRead[];

/**
 * The walk over the user's address holds and their rows, shared by both backends: it yields
 * the reads it needs and returns the plan ({@link planAuditRewrites}). SQLite answers each read
 * synchronously (its anonymization runs inside a synchronous write), PostgreSQL with `await`.
 */
export function* walkAuditRows(
  user: { email: string; actor?: string },
  ref: string,
): Generator<AuditRowQuery, AuditRewritePlan, AuditRowAnswer> {
  const holds: AddressHold[] = [];
  let next: { address: string; untilId: number } | undefined = {
    address: user.email,
    untilId: AUDIT_ID_END,
  };
  while (next !== undefined && holds.length < MAX_ADDRESS_HOLDS) {
    const start = (yield { kind: "hold_start", ...next }) as HoldStart | undefined;
    const step = toAddressHold(next.address, next.untilId, start);
    holds.push(step.hold);
    next = step.before;
  }
  const rows = new Map<number, AuditRowRead>();
  for (const hold of holds) {
    const bySubject = (yield { kind: "subject_rows", hold }) as readonly AuditRowRead[];
    for (const row of bySubject) rows.set(row.id, row);
    const byDetail = (yield {
      kind: "detail_rows",
      hold,
      actions: AUDIT_ADDRESS_DETAIL_ACTIONS,
    }) as readonly AuditRowRead[];
    for (const row of byDetail) rows.set(row.id, row);
  }
  if (user.actor !== undefined) {
    const fromId = Math.min(...holds.map((hold) => hold.fromId));
    const found =
      (yield { kind: "actor_rows", fromId, actor: user.actor }) as readonly AuditRowRead[];
    for (const row of found) rows.set(row.id, row);
  }
  return planAuditRewrites([...rows.values()], { holds, actor: user.actor, ref });
}
