/**
 * keygate's admin CLI: users, API keys and tokens in the SQLite store.
 * Every change goes through the store's domain functions, never raw SQL, and
 * works while the server runs (WAL, busy timeout).
 *
 * Usage: `deno task admin --help`
 *
 * @module
 */
import { parseArgs } from "node:util";
import { type Clock, systemClock } from "../src/platform/clock.ts";
import { formatDuration, parseDuration } from "../src/platform/duration.ts";
import { createPasswordHasher, type PasswordHasher } from "../src/passwords/passwords.ts";
import { createLogger, type LogFields } from "../src/platform/logger.ts";
import type { ApiKey, AuditEntry, Store, User } from "../src/store/store.ts";
import { findSqliteMaintenance, openStore } from "../src/store/open_store.ts";
import { inspectDatabaseFile, type SqliteMaintenance } from "../src/store/sqlite/maintenance.ts";
import { toCliActor, toUserRef } from "../src/auth/audit.ts";
import { isPasswordSized, MAX_PASSWORD_BYTES } from "../src/auth/account_rules.ts";
import type { ChangeDeps } from "../src/auth/changes.ts";
import { AuthError } from "../src/auth/errors.ts";
import { toKeyStatus } from "../src/auth/key_status.ts";
import {
  createKey,
  DEFAULT_ROTATION_GRACE_SECONDS,
  findKeyByText,
  revokeKey,
  rotateKey,
  setKeyDisabled,
} from "../src/auth/keys.ts";
import { toAccountSubject, toClientSubject } from "../src/auth/throttle.ts";
import {
  addUser,
  changeUserPassword,
  changeUserTimeout,
  describeExisting,
  describeTimeout,
  findUserInAnyForm,
  findUserOrFail,
  revokeUserTokens,
  setUserDisabled,
  toAccountEmail,
} from "../src/auth/users.ts";

/** The admin CLI's surroundings, replaceable in tests. */
export interface AdminIO {
  env: Readonly<Record<string, string | undefined>>;
  stdout(text: string): void;
  stderr(text: string): void;
  /** The first line of standard input, without echo on a terminal. */
  readPassword(): Promise<string>;
  clock: Clock;
  hasher: PasswordHasher;
  /** Receives one JSON line per change (the audit trail). Default: {@link AdminIO.stderr}. */
  audit?(line: string): void;
}

/** A failure the user can fix; printed as one line, exit code 1. */
export class AdminError extends Error {
  override name = "AdminError";
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

const DEFAULT_DB = "db/keygate.sqlite3";

const HELP = `keygate admin: manage users, API keys and tokens

Usage: deno task admin COMMAND [ARGS] [--db PATH]

Users:
  user add EMAIL [--timeout DURATION]   Add a user; password from standard input
  user list [--json]                    List users
  user set-timeout EMAIL DURATION|default
                                        Set the user's token lifetime
  user set-password EMAIL               Replace the password (standard input);
                                        revokes the user's tokens
  user disable EMAIL                    Disable the user; revokes their tokens
  user enable EMAIL                     Enable the user again

API keys:
  key create EMAIL [--label TEXT] [--expires DURATION] [--introspect]
                                        Create a key; printed once, alone on the last line.
                                        --introspect: a resource-server key that may call
                                        POST /api/userservice/tokens/introspect
  key list [EMAIL] [--unused DURATION] [--json]
                                        List keys (never whole keys) with status and last use;
                                        --unused: only keys not used for that long
  key rotate KEY_OR_ID [--grace DURATION|0]
                                        Issue a successor (same owner, label, lifetime); the
                                        old key and its tokens stop after the grace (24h)
  key disable KEY_OR_ID                 Suspend a key and its tokens
  key enable KEY_OR_ID                  Resume a disabled key
  key revoke KEY_OR_ID                  Revoke a key and the tokens issued with it

Tokens:
  token revoke-all EMAIL [--before TIME]
                                        Invalidate every token of a user issued before TIME
                                        (default: now), in one write
  token purge                           Delete expired and revoked token rows

Login throttle:
  throttle list [--json]                List live failed-login counters
  throttle clear EMAIL|ADDRESS          Forget the counters of a user's API keys, or of a
                                        client address (IPv6: its /64)

Audit:
  audit [--since TIME] [--json]         Print the audit log (admin changes, security events)

Database:
  db backup PATH                        Write a consistent copy to PATH (a new file)
                                        and check it; safe while the server runs
  db check                              Run an integrity check; exit 1 on problems

Every change is logged as one JSON line on standard error (the audit trail).

Options:
  --db PATH        SQLite database (env KEYGATE_DB; default ${DEFAULT_DB})
  --help           Show this help

DURATION is a whole number and a unit: 90s, 15m, 10h, 7d.
TIME is an ISO 8601 time (2026-05-01T12:00:00Z), milliseconds since the epoch,
or a DURATION meaning that long ago (24h).
`;

export { DEFAULT_ROTATION_GRACE_SECONDS };

interface Command {
  usage: string;
  options: readonly string[];
  run(store: Store, args: string[], flags: Flags, io: AdminIO & Audited): Promise<void>;
}

/** The audit logger of one command run. */
interface Audited {
  /** Logs one admin change: which command, on what, with what effect. */
  change(fields: LogFields): void;
}

/** The domain's change dependencies for a command run: the CLI user acts, changes are logged. */
function toChangeDeps(store: Store, io: AdminIO & Audited): ChangeDeps {
  return {
    store,
    clock: io.clock,
    actor: toCliActor(io.env),
    noteChange: (entry) =>
      io.change({ action: entry.action, subject: entry.subject, ...entry.detail }),
  };
}

interface Flags {
  json?: boolean;
  timeout?: string;
  label?: string;
  expires?: string;
  grace?: string;
  before?: string;
  since?: string;
  unused?: string;
  introspect?: boolean;
}

/** Every option some command takes; each command lists the ones that apply to it. */
const COMMAND_OPTIONS = [
  "json",
  "timeout",
  "label",
  "expires",
  "grace",
  "before",
  "since",
  "unused",
  "introspect",
] as const;

const COMMANDS: Record<string, Command> = {
  "user add": {
    usage: "user add EMAIL [--timeout DURATION]",
    options: ["timeout"],
    async run(store, [emailArg], flags, io) {
      if (emailArg === undefined) throw usage("user add EMAIL");
      const email = toAccountEmailOrFail(emailArg);
      const existing = await findUserInAnyForm(store, email);
      if (existing) {
        throw new AdminError(describeExisting(email, existing));
      }
      const timeout = flags.timeout === undefined ? null : toDuration(flags.timeout);
      const passwordHash = await io.hasher.hash(toPassword(await io.readPassword()));
      const user = await addUser(toChangeDeps(store, io), {
        email,
        passwordHash,
        tokenTimeoutSeconds: timeout,
      });
      io.stdout(`Added user ${user.email} (id ${user.id}, token timeout ${describeTimeout(user)})`);
    },
  },
  "user list": {
    usage: "user list [--json]",
    options: ["json"],
    async run(store, _args, flags, io) {
      const users = (await store.listUsers()).map((user) => ({
        id: user.id,
        email: user.email,
        token_timeout: user.tokenTimeoutSeconds === null
          ? "default"
          : formatDuration(user.tokenTimeoutSeconds),
        status: user.disabled ? "disabled" : "enabled",
        created_at: new Date(user.createdAt).toISOString(),
      }));
      printRows(io, users, flags.json);
    },
  },
  "user set-timeout": {
    usage: "user set-timeout EMAIL DURATION|default",
    options: [],
    async run(store, [email, duration], _flags, io) {
      if (duration === undefined) throw usage("user set-timeout EMAIL DURATION|default");
      const user = await findUser(store, email);
      const timeout = duration === "default" ? null : toDuration(duration);
      await changeUserTimeout(toChangeDeps(store, io), user, timeout);
      io.stdout(
        `Token timeout of ${user.email} is now ${timeout === null ? "the default" : duration}`,
      );
    },
  },
  "user set-password": {
    usage: "user set-password EMAIL",
    options: [],
    async run(store, [email], _flags, io) {
      const user = await findUser(store, email);
      const passwordHash = await io.hasher.hash(toPassword(await io.readPassword()));
      const revoked = await changeUserPassword(toChangeDeps(store, io), user, passwordHash);
      io.stdout(`Password of ${user.email} changed; ${revoked} live token(s) revoked`);
    },
  },
  "user disable": {
    usage: "user disable EMAIL",
    options: [],
    async run(store, [email], _flags, io) {
      const user = await findUser(store, email);
      const revoked = await setUserDisabled(toChangeDeps(store, io), user, true);
      io.stdout(`Disabled ${user.email}; ${revoked} live token(s) revoked`);
    },
  },
  "user enable": {
    usage: "user enable EMAIL",
    options: [],
    async run(store, [email], _flags, io) {
      const user = await findUser(store, email);
      await setUserDisabled(toChangeDeps(store, io), user, false);
      io.stdout(`Enabled ${user.email}`);
    },
  },
  "key create": {
    usage: "key create EMAIL [--label TEXT] [--expires DURATION] [--introspect]",
    options: ["label", "expires", "introspect"],
    async run(store, [email], flags, io) {
      const user = await findUser(store, email);
      const { key, apiKey } = await createKey(toChangeDeps(store, io), user, {
        label: flags.label,
        expiresInSeconds: flags.expires === undefined ? undefined : toDuration(flags.expires),
        introspect: flags.introspect,
      });
      const expiresAt = key.expiresAt;
      const until = expiresAt === null ? "" : ` until ${toIso(expiresAt)}`;
      const kind = key.introspect ? "resource-server API key (may introspect tokens)" : "API key";
      io.stdout(
        `Created ${kind} ${key.id} for ${user.email}${until}. It is shown only this once:`,
      );
      io.stdout(apiKey);
    },
  },
  "key list": {
    usage: "key list [EMAIL] [--unused DURATION] [--json]",
    options: ["json", "unused"],
    async run(store, [email], flags, io) {
      const userId = email === undefined ? undefined : (await findUser(store, email)).id;
      const now = io.clock.now();
      const unusedSince = flags.unused === undefined
        ? undefined
        : now - toDuration(flags.unused) * 1000;
      const keys = (await store.listApiKeys(userId))
        .filter((key) =>
          unusedSince === undefined ||
          (key.revokedAt === null && (key.lastUsedAt ?? key.createdAt) <= unusedSince)
        )
        .map((key) => ({
          id: key.id,
          key: `${key.prefix}…`,
          email: key.email,
          label: key.label,
          status: toKeyStatus(key, now),
          introspect: key.introspect ? "yes" : "no",
          created_at: toIso(key.createdAt),
          expires_at: toIsoOrNull(key.expiresAt),
          replaced_by: key.replacedBy,
          last_used_at: toIsoOrNull(key.lastUsedAt),
          last_used_from: key.lastUsedFrom,
          uses: key.useCount,
        }));
      printRows(io, keys, flags.json);
    },
  },
  "key rotate": {
    usage: "key rotate KEY_OR_ID [--grace DURATION|0]",
    options: ["grace"],
    async run(store, [keyOrId], flags, io) {
      const old = await findKey(store, keyOrId, "key rotate KEY_OR_ID [--grace DURATION|0]");
      const graceSeconds = flags.grace === undefined
        ? DEFAULT_ROTATION_GRACE_SECONDS
        : flags.grace === "0"
        ? 0
        : toDuration(flags.grace);
      const { key, apiKey, oldKeyUntil: oldUntil } = await rotateKey(
        toChangeDeps(store, io),
        old,
        graceSeconds,
      );
      io.stdout(
        `Rotated API key ${old.id} to ${key.id}; key ${old.id} and its tokens work until ` +
          `${toIso(oldUntil)}. The new key is shown only this once:`,
      );
      io.stdout(apiKey);
    },
  },
  "key disable": {
    usage: "key disable KEY_OR_ID",
    options: [],
    async run(store, [keyOrId], _flags, io) {
      await disableKey(store, await findKey(store, keyOrId, "key disable KEY_OR_ID"), true, io);
    },
  },
  "key enable": {
    usage: "key enable KEY_OR_ID",
    options: [],
    async run(store, [keyOrId], _flags, io) {
      await disableKey(store, await findKey(store, keyOrId, "key enable KEY_OR_ID"), false, io);
    },
  },
  "key revoke": {
    usage: "key revoke KEY_OR_ID",
    options: [],
    async run(store, [keyOrId], _flags, io) {
      const key = await findKey(store, keyOrId, "key revoke KEY_OR_ID");
      const revoked = await revokeKey(toChangeDeps(store, io), key);
      if (revoked === undefined) {
        io.stdout(`API key ${key.id} was already revoked`);
        return;
      }
      io.stdout(`Revoked API key ${key.id}; ${revoked} live token(s) revoked`);
    },
  },
  "token revoke-all": {
    usage: "token revoke-all EMAIL [--before TIME]",
    options: ["before"],
    async run(store, [email], flags, io) {
      const user = await findUser(store, email);
      const now = io.clock.now();
      const before = flags.before === undefined ? undefined : toTime(flags.before, now);
      if (before !== undefined && before > now) {
        throw new AdminError(`Invalid --before "${flags.before}": it is in the future`);
      }
      const revoked = await revokeUserTokens(toChangeDeps(store, io), user, before);
      const when = before === undefined ? "until now" : `before ${toIso(before)}`;
      io.stdout(`Revoked ${revoked} live token(s) of ${user.email} (issued ${when})`);
    },
  },
  "token purge": {
    usage: "token purge",
    options: [],
    async run(store, _args, _flags, io) {
      const deleted = await store.purgeEndedTokens(io.clock.now(), {
        audit: (n) => audit(io, "tokens.purged", "tokens", { deleted: n }),
      });
      noteChanges(io, "tokens.purged", "tokens", { deleted });
      io.stdout(`Deleted ${deleted} expired or revoked token row(s)`);
    },
  },
  "audit": {
    usage: "audit [--since TIME] [--json]",
    options: ["since", "json"],
    async run(store, args, flags, io) {
      if (args.length > 0) throw usage("audit [--since TIME] [--json]");
      const since = flags.since === undefined ? 0 : toTime(flags.since, io.clock.now());
      const rows = await store.listAudit(since);
      if (flags.json) {
        io.stdout(JSON.stringify(
          rows.map((row) => ({ ...row, at: toIso(row.at) })),
          null,
          2,
        ));
        return;
      }
      printRows(
        io,
        rows.map((row) => ({
          at: toIso(row.at),
          actor: row.actor,
          action: row.action,
          subject: row.subject,
          detail: JSON.stringify(row.detail),
        })),
      );
    },
  },
  "db backup": {
    usage: "db backup PATH",
    options: [],
    async run(store, [path], _flags, io) {
      if (path === undefined) throw usage("db backup PATH");
      if (exists(path)) throw new AdminError(`Cannot write backup: "${path}" already exists`);
      await sqliteOnly(store, "db backup").backupDatabaseTo(path);
      const { problems, counts } = inspectDatabaseFile(path);
      if (problems.length > 0) {
        throw new AdminError(`Backup "${path}" failed its integrity check: ${problems[0]}`);
      }
      io.change({ path, users: counts.users, api_keys: counts.api_keys, tokens: counts.tokens });
      io.stdout(
        `Wrote backup ${path}: ${counts.users} user(s), ${counts.api_keys} API key(s), ` +
          `${counts.tokens} token row(s); integrity ok`,
      );
    },
  },
  "db check": {
    usage: "db check",
    options: [],
    // deno-lint-ignore require-await
    async run(store, _args, _flags, io) {
      const problems = sqliteOnly(store, "db check").checkDatabaseIntegrity();
      for (const problem of problems) io.stdout(problem);
      if (problems.length > 0) {
        throw new AdminError(`Integrity check failed: ${problems.length} problem(s)`);
      }
      io.stdout("Integrity check: ok");
    },
  },
};

COMMANDS["throttle list"] = {
  usage: "throttle list [--json]",
  options: ["json"],
  async run(store, _args, flags, io) {
    const now = io.clock.now();
    const keys = new Map((await store.listApiKeys()).map((key) => [`key:${key.id}`, key]));
    const rows = (await store.listLoginFailures(now)).map((row) => {
      const key = keys.get(row.subject);
      return {
        subject: key ? `key ${key.id} (${key.prefix}…, ${key.email})` : row.subject,
        failures: row.failures,
        blocked_for: row.blockedUntil > now
          ? `${Math.ceil((row.blockedUntil - now) / 1000)}s`
          : "-",
        last_failure_at: new Date(row.lastFailureAt).toISOString(),
      };
    });
    printRows(io, rows, flags.json);
  },
};

COMMANDS["throttle clear"] = {
  usage: "throttle clear EMAIL|ADDRESS",
  options: [],
  async run(store, [target], _flags, io) {
    if (target === undefined) throw usage("throttle clear EMAIL|ADDRESS");
    if (target.includes("@")) {
      const user = await findUser(store, target);
      const subjects = (await store.listApiKeys(user.id)).map((key) => toAccountSubject(key.id));
      const cleared = await store.clearLoginFailures(subjects, {
        now: io.clock.now(),
        audit: (n) => audit(io, "throttle.cleared", toUserRef(user.email), { counters: n }),
      });
      noteChanges(io, "throttle.cleared", toUserRef(user.email), { counters: cleared });
      io.stdout(`Cleared the failed-login counters of ${cleared} API key(s) of ${user.email}`);
    } else {
      const subject = toClientSubject(target);
      const cleared = await store.clearLoginFailures([subject], {
        now: io.clock.now(),
        audit: (n) => audit(io, "throttle.cleared", subject, { counters: n }),
      }) === 1;
      noteChanges(io, "throttle.cleared", subject, { counters: cleared ? 1 : 0 });
      io.stdout(
        cleared
          ? `Cleared the failed-login counter of ${subject.slice("client:".length)}`
          : `No failed-login counter for ${subject.slice("client:".length)}`,
      );
    }
  },
};

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

function usage(text: string): AdminError {
  return new AdminError(`Usage: deno task admin ${text}`, 2);
}

function toAccountEmailOrFail(text: string): string {
  try {
    return toAccountEmail(text);
  } catch (error) {
    throw error instanceof AuthError ? new AdminError(error.message) : error;
  }
}

function toPassword(password: string): string {
  if (!isPasswordSized(password)) {
    throw new AdminError(
      `Invalid password: expected 1 to ${MAX_PASSWORD_BYTES} bytes on standard input`,
    );
  }
  return password;
}

function toDuration(text: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    throw new AdminError((error as Error).message);
  }
}

async function findUser(store: Store, email: string | undefined): Promise<User> {
  if (email === undefined) throw new AdminError("Missing EMAIL argument", 2);
  return await findUserOrFail(store, email);
}

/** A key given whole (any letter case) or by its numeric id. */
async function findKey(
  store: Store,
  keyOrId: string | undefined,
  usageText: string,
): Promise<ApiKey> {
  if (keyOrId === undefined) throw usage(usageText);
  const key = await findKeyByText(store, keyOrId);
  if (key === undefined) throw new AdminError("No such API key");
  return key;
}

async function disableKey(
  store: Store,
  key: ApiKey,
  disabled: boolean,
  io: AdminIO & Audited,
): Promise<void> {
  const changed = await setKeyDisabled(toChangeDeps(store, io), key, disabled);
  const state = disabled ? "disabled" : "enabled";
  io.stdout(changed ? `API key ${key.id} ${state}` : `API key ${key.id} was already ${state}`);
}

/** An audit entry for an admin change, as the operating-system user running the CLI. */
function audit(
  io: AdminIO & Audited,
  action: AuditEntry["action"],
  subject: string,
  detail: Record<string, string | number | null> = {},
): AuditEntry {
  return { at: io.clock.now(), actor: toCliActor(io.env), action, subject, detail };
}

/** Logs an admin change that has committed. */
function noteChanges(
  io: AdminIO & Audited,
  action: string,
  subject: string,
  detail: Record<string, string | number | null>,
): void {
  io.change({ action, subject, ...detail });
}

/** The SQLite-only operations, for commands that need them. */
function sqliteOnly(store: Store, command: string): SqliteMaintenance {
  const maintenance = findSqliteMaintenance(store);
  if (maintenance === undefined) {
    throw new AdminError(`"${command}" works on SQLite only: use the database's own tools`);
  }
  return maintenance;
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?)?(Z|[+-]\d{2}:?\d{2})?$/;

/**
 * Parses a TIME: an ISO 8601 time (without a zone it is UTC), milliseconds
 * since the epoch, or a duration meaning that long before `now`.
 */
function toTime(text: string, now: number): number {
  if (/^[0-9]{1,15}$/.test(text)) return Number(text);
  if (ISO_TIME.test(text)) {
    const zoned = /(Z|[+-]\d{2}:?\d{2})$/.test(text) || text.length === 10 ? text : `${text}Z`;
    const time = Date.parse(zoned.replace(" ", "T"));
    if (Number.isFinite(time)) return time;
  }
  try {
    return now - parseDuration(text) * 1000;
  } catch {
    throw new AdminError(
      `Cannot parse time "${
        text.slice(0, 64)
      }": expected an ISO 8601 time, milliseconds since the epoch or a duration like "24h"`,
    );
  }
}

function toIso(ms: number): string {
  return new Date(ms).toISOString();
}

function toIsoOrNull(ms: number | null): string | null {
  return ms === null ? null : toIso(ms);
}

function printRows(
  io: AdminIO,
  rows: Record<string, string | number | null>[],
  json?: boolean,
): void {
  if (json) {
    io.stdout(JSON.stringify(rows, null, 2));
    return;
  }
  if (rows.length === 0) {
    io.stdout("(none)");
    return;
  }
  const columns = Object.keys(rows[0]);
  const widths = columns.map((c) =>
    Math.max(c.length, ...rows.map((r) => String(r[c] ?? "-").length))
  );
  const line = (cells: string[]) =>
    cells.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd();
  io.stdout(line(columns.map((c) => c.toUpperCase())));
  for (const row of rows) io.stdout(line(columns.map((c) => String(row[c] ?? "-"))));
}

/** Reads the first line of standard input; on a terminal, prompts without echo. */
export async function readPasswordFromStdin(): Promise<string> {
  const bytes: number[] = [];
  const buffer = new Uint8Array(1);
  const terminal = Deno.stdin.isTerminal();
  if (terminal) {
    Deno.stderr.writeSync(new TextEncoder().encode("Password: "));
    Deno.stdin.setRaw(true);
  }
  try {
    while (true) {
      const n = await Deno.stdin.read(buffer);
      if (n === null || buffer[0] === 0x0a || buffer[0] === 0x0d) break;
      if (terminal && buffer[0] === 0x03) throw new AdminError("Cancelled");
      bytes.push(buffer[0]);
      if (bytes.length > MAX_PASSWORD_BYTES) break;
    }
  } finally {
    if (terminal) {
      Deno.stdin.setRaw(false);
      Deno.stderr.writeSync(new TextEncoder().encode("\n"));
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** Runs one admin command; resolves to the exit code. */
export async function main(args: string[], overrides: Partial<AdminIO> = {}): Promise<number> {
  const io: AdminIO = {
    env: overrides.env ?? Deno.env.toObject(),
    stdout: overrides.stdout ?? ((text) => console.log(text)),
    stderr: overrides.stderr ?? ((text) => console.error(text)),
    readPassword: overrides.readPassword ?? readPasswordFromStdin,
    clock: overrides.clock ?? systemClock,
    hasher: overrides.hasher ?? createPasswordHasher({ workers: 1 }),
  };
  let store: Store | undefined;
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args,
        allowPositionals: true,
        strict: true,
        options: {
          db: { type: "string" },
          json: { type: "boolean" },
          timeout: { type: "string" },
          label: { type: "string" },
          expires: { type: "string" },
          grace: { type: "string" },
          before: { type: "string" },
          since: { type: "string" },
          unused: { type: "string" },
          introspect: { type: "boolean" },
          help: { type: "boolean", short: "h" },
        },
      });
    } catch (error) {
      throw new AdminError(`${(error as Error).message} (see --help)`, 2);
    }
    const { values, positionals } = parsed;
    const name = positionals[0] === "audit" ? "audit" : positionals.slice(0, 2).join(" ");
    const command = COMMANDS[name];
    if (values.help || positionals.length === 0) {
      io.stdout(command ? `Usage: deno task admin ${command.usage} [--db PATH]` : HELP);
      return 0;
    }
    if (!command) throw new AdminError(`Unknown command "${name}" (see --help)`, 2);
    for (const option of COMMAND_OPTIONS) {
      if (values[option] !== undefined && !command.options.includes(option)) {
        throw new AdminError(`Option --${option} does not apply to "${name}" (see --help)`, 2);
      }
    }
    const dbPath = values.db ?? io.env.KEYGATE_DB ?? DEFAULT_DB;
    store = await openStore(dbPath);
    const changeLog = createLogger({
      level: "info",
      write: overrides.audit ?? io.stderr,
      clock: io.clock,
    });
    const change = (fields: LogFields) =>
      changeLog.info("admin change", {
        event: "admin_change",
        command: name,
        actor: toCliActor(io.env),
        db: dbPath,
        ...fields,
      });
    await command.run(store, positionals.slice(name.split(" ").length), values, { ...io, change });
    return 0;
  } catch (error) {
    if (error instanceof AdminError) {
      io.stderr(`keygate admin: ${error.message}`);
      return error.exitCode;
    }
    io.stderr(`keygate admin: ${(error as Error).message ?? error}`);
    return 1;
  } finally {
    await store?.closeStore();
    if (overrides.hasher === undefined) io.hasher.close();
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
