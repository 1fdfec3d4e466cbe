/**
 * Operators of the admin API: people or programs that manage keygate over
 * HTTPS instead of a shell. Each has a name, a role (`read` or `write`) and a
 * token shown once at creation; only its SHA-256 digest is stored, like an
 * API key's. Their changes are audited with actor `operator:<name>`.
 *
 * Signing in: `Authorization: Bearer kgo_…`. A missing, unknown or revoked
 * token fails the same way (`invalid_token`), and every wrong token counts
 * against the client address's counter (throttle.ts, subject `admin:ADDRESS`)
 * with its own, stricter rule and is audited. The token is verified before the
 * counter is read: a valid token passes even while its address is blocked, so
 * that wrong tokens from a shared address (every operator behind an SSH tunnel
 * is 127.0.0.1) cannot lock the operators out. Blocking guesses does not
 * protect the tokens (206 random bits are not guessed at any rate); it keeps a
 * guessing client from filling the audit log. While the address is blocked, a
 * wrong token gets 429 and is neither counted nor audited again. A request
 * without any credential is refused but not counted.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import { StoreConflict } from "../store/errors.ts";
import type { Operator, OperatorRole, Store } from "../store/store.ts";
import { toOperatorRef } from "./audit.ts";
import { type ChangeDeps, observeAudit, toAuditEntry } from "./changes.ts";
import { generateToken, hashSecret } from "./credentials.ts";
import type { BulkRead } from "./read_meter.ts";
import { AuthError } from "./errors.ts";
import { createThrottle, THROTTLE_RULES, type ThrottleRule, toClientNetwork } from "./throttle.ts";

/** Every operator token starts with this, so secret scanners and people can tell it apart. */
export const OPERATOR_TOKEN_PREFIX = "kgo_";
const OPERATOR_TOKEN = /^kgo_[a-z0-9]{40}$/;
/** Letters, digits, `.`, `_`, `-` and `@`, starting with a letter or digit, at most 64. */
const OPERATOR_NAME = /^[a-z0-9][a-z0-9._@-]{0,63}$/;
/** Characters of the token shown in listings (the prefix and 4 more). */
const SHOWN_TOKEN_LENGTH = 8;

/**
 * Failed operator sign-ins per client address: 5, then 1 s, 2 s, 4 s, … up
 * to 15 min; kept 1 h. Stricter than user logins: an operator token is
 * worth more than one user's password.
 */
export const OPERATOR_THROTTLE: ThrottleRule = {
  threshold: 5,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  windowMs: 3_600_000,
};

/** The roles, for parsing and documents. */
export const OPERATOR_ROLES: readonly OperatorRole[] = ["read", "write"];

/** Generates an operator token: the prefix and 40 characters of `[a-z0-9]` (about 206 bits). */
export function generateOperatorToken(): string {
  return OPERATOR_TOKEN_PREFIX + generateToken();
}

/** Whether `text` has the shape of an operator token. */
export function isOperatorTokenShaped(text: string): boolean {
  return OPERATOR_TOKEN.test(text);
}

/** An operator's name, lower-cased. @throws {AuthError} `invalid_request` for any other shape. */
export function toOperatorName(text: string): string {
  const name = text.toLowerCase();
  if (!OPERATOR_NAME.test(name)) {
    throw new AuthError(
      "invalid_request",
      `Invalid operator name "${
        text.slice(0, 64)
      }": expected 1 to 64 letters, digits, ".", "_", "-" or "@"`,
    );
  }
  return name;
}

/** A role. @throws {AuthError} `invalid_request` unless `read` or `write`. */
export function toOperatorRole(text: string): OperatorRole {
  if (text === "read" || text === "write") return text;
  throw new AuthError(
    "invalid_request",
    `Invalid role "${text.slice(0, 32)}": expected "read" or "write"`,
  );
}

/** An operator just made, and its token (shown once). */
export interface CreatedOperator {
  operator: Operator;
  token: string;
}

/**
 * Creates an operator. A name is never used twice, also not after its
 * operator was revoked: the audit log names operators (`operator:ann`), and
 * one name must mean one operator there.
 *
 * @throws {AuthError} `invalid_request` for the name, `conflict` when an
 * operator has it or had it.
 */
export async function createOperator(
  deps: ChangeDeps,
  nameText: string,
  role: OperatorRole,
): Promise<CreatedOperator> {
  const name = toOperatorName(nameText);
  const holder = (await deps.store.listOperators()).find((op) => op.name === name);
  if (holder !== undefined && holder.revokedAt === null) {
    throw new AuthError("conflict", `Operator "${name}" already exists`);
  }
  if (holder !== undefined) {
    throw new AuthError(
      "conflict",
      `Operator "${name}" was revoked: a name is never used again (the audit log names ` +
        "operators by it), choose another",
    );
  }
  const token = generateOperatorToken();
  const change = observeAudit(
    deps,
    (created: Operator) =>
      toAuditEntry(deps, "operator.created", toOperatorRef(created.name), { role }),
  );
  let operator: Operator;
  try {
    operator = await deps.store.insertOperator({
      name,
      role,
      tokenHash: hashSecret(token),
      prefix: token.slice(0, SHOWN_TOKEN_LENGTH),
    }, { now: deps.clock.now(), audit: change.audit });
  } catch (error) {
    // Another operator took the name between the check above and the insert.
    if (error instanceof StoreConflict) {
      throw new AuthError("conflict", `Operator "${name}" already exists`, { cause: error });
    }
    throw error;
  }
  change.notify();
  return { operator, token };
}

/**
 * Revokes the operator with this name. @throws {AuthError} `invalid_request`
 * for a name no operator can have, `not_found` when none is active.
 */
export async function revokeOperator(deps: ChangeDeps, nameText: string): Promise<Operator> {
  const name = toOperatorName(nameText);
  const operator = (await deps.store.listOperators())
    .find((op) => op.name === name && op.revokedAt === null);
  if (operator === undefined) {
    throw new AuthError("not_found", `No operator "${name.slice(0, 64)}"`);
  }
  const change = observeAudit(
    deps,
    (done: boolean) =>
      done ? toAuditEntry(deps, "operator.revoked", toOperatorRef(operator.name)) : undefined,
  );
  const done = await deps.store.revokeOperator(operator.id, {
    now: deps.clock.now(),
    audit: change.audit,
  });
  change.notify();
  if (!done) throw new AuthError("not_found", `No operator "${name.slice(0, 64)}"`);
  return { ...operator, revokedAt: deps.clock.now() };
}

/** What {@link createOperatorAuth} needs. */
export interface OperatorAuthDeps {
  store: Store;
  clock: Clock;
  /** The rule for failed sign-ins per client address. Default {@link OPERATOR_THROTTLE}. */
  rule?: ThrottleRule;
}

/** Signs operators in. */
export interface OperatorAuth {
  /**
   * The operator an `Authorization` header names, from `client`.
   *
   * @throws {AuthError} `too_many_attempts` while the address is blocked,
   * `invalid_token` for a missing, malformed, unknown or revoked token.
   */
  authenticate(authorization: string | null, client: string): Promise<Operator>;
}

/** The throttle subject of an address's failed operator sign-ins. */
export function toOperatorClientSubject(address: string): string {
  return `admin:${toClientNetwork(address)}`.slice(0, 128);
}

/** Creates the sign-in check of the admin API. */
export function createOperatorAuth(deps: OperatorAuthDeps): OperatorAuth {
  const { store, clock } = deps;
  const throttle = createThrottle({
    store,
    clock,
    // Subjects `admin:…` are counted by the client rule (throttle.ts).
    rules: { account: THROTTLE_RULES.account, client: deps.rule ?? OPERATOR_THROTTLE },
  });

  return {
    async authenticate(authorization, client) {
      const subjects = { client: toOperatorClientSubject(client) };
      const match = /^Bearer +(\S+) *$/i.exec(authorization ?? "");
      const token = match?.[1] ?? "";
      // The token first, so that a blocked address never locks out an operator whose token is
      // valid (docs/security.md, "Operator sign-in"): one indexed look-up of its digest.
      const operator = isOperatorTokenShaped(token)
        ? await store.findOperatorByHash(hashSecret(token))
        : undefined;
      if (operator !== undefined && operator.revokedAt === null) return operator;
      // No credential, no guess: nothing to count or record.
      if (authorization === null || authorization === "") throw invalidOperatorToken("missing");
      // A wrong token from a blocked address: 429, neither counted nor audited again.
      await throttle.check(subjects);
      const detail = operator === undefined ? "unknown" : "revoked";
      await throttle.recordFailure(subjects, {
        at: clock.now(),
        actor: "anonymous",
        action: "operator.login_failed",
        subject: subjects.client,
        detail: { reason: detail, client },
      });
      throw invalidOperatorToken(detail);
    },
  };
}

function invalidOperatorToken(detail: string): AuthError {
  return new AuthError(
    "invalid_token",
    "Missing or invalid operator token: send Authorization: Bearer <operator token>",
    { detail: `operator_${detail}` },
  );
}

/**
 * Lets a `write` operator through; refuses a `read` operator, audited as
 * `operator.forbidden` with the route it called, so that probing for changes
 * leaves a trace.
 *
 * @throws {AuthError} `forbidden` unless the operator may change things.
 */
export async function requireWriteRole(
  deps: ChangeDeps,
  operator: Operator,
  route: string,
): Promise<void> {
  if (operator.role === "write") return;
  await deps.store.appendAudit(
    toAuditEntry(deps, "operator.forbidden", toOperatorRef(operator.name), { route }),
  );
  throw new AuthError("forbidden", `Operator "${operator.name}" may only read`);
}

/** Audits a bulk read by an operator (read_meter.ts) as `operator.bulk_read`. */
export async function recordBulkRead(
  deps: ChangeDeps,
  operator: Operator,
  read: BulkRead & { route: string },
): Promise<void> {
  await deps.store.appendAudit(
    toAuditEntry(deps, "operator.bulk_read", toOperatorRef(operator.name), {
      reads: read.pages,
      since: new Date(read.since).toISOString(),
      route: read.route,
    }),
  );
}
