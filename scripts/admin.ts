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
import { type Clock, systemClock } from "../src/clock.ts";
import { generateApiKey, hashSecret, normalizeApiKey, toKeyPrefix } from "../src/credentials.ts";
import { formatDuration, parseDuration } from "../src/duration.ts";
import { createPasswordHasher, type PasswordHasher } from "../src/passwords.ts";
import { createLogger, type LogFields, type Logger } from "../src/logger.ts";
import { inspectDatabaseFile, openStore, type Store, type User } from "../src/store.ts";
import { MAX_EMAIL_LENGTH, MAX_PASSWORD_BYTES } from "../src/token_router.ts";

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
  key create EMAIL [--label TEXT]       Create a key; printed once, alone on the last line
  key list [EMAIL] [--json]             List keys (never whole keys)
  key revoke KEY_OR_ID                  Revoke a key and the tokens issued with it

Tokens:
  token revoke-all EMAIL                Revoke every live token of a user
  token purge                           Delete expired and revoked token rows

Database:
  db backup PATH                        Write a consistent copy to PATH (a new file)
                                        and check it; safe while the server runs
  db check                              Run an integrity check; exit 1 on problems

Every change is logged as one JSON line on standard error (the audit trail).

Options:
  --db PATH        SQLite database (env KEYGATE_DB; default ${DEFAULT_DB})
  --help           Show this help

DURATION is a whole number and a unit: 90s, 15m, 10h, 7d.
`;

interface Command {
  usage: string;
  options: readonly string[];
  run(store: Store, args: string[], flags: Flags, io: AdminIO & Audited): Promise<void> | void;
}

/** The audit logger of one command run. */
interface Audited {
  /** Logs one admin change: which command, on what, with what effect. */
  change(fields: LogFields): void;
}

interface Flags {
  json?: boolean;
  timeout?: string;
  label?: string;
}

const COMMANDS: Record<string, Command> = {
  "user add": {
    usage: "user add EMAIL [--timeout DURATION]",
    options: ["timeout"],
    async run(store, [emailArg], flags, io) {
      const email = toEmail(emailArg);
      if (store.findUserByEmail(email)) throw new AdminError(`User "${email}" already exists`);
      const timeout = flags.timeout === undefined ? null : toDuration(flags.timeout);
      const passwordHash = await io.hasher.hash(toPassword(await io.readPassword()));
      const user = store.insertUser(
        { email, passwordHash, tokenTimeoutSeconds: timeout },
        io.clock.now(),
      );
      io.change({ user_id: user.id });
      io.stdout(`Added user ${user.email} (id ${user.id}, token timeout ${describeTimeout(user)})`);
    },
  },
  "user list": {
    usage: "user list [--json]",
    options: ["json"],
    run(store, _args, flags, io) {
      const users = store.listUsers().map((user) => ({
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
    run(store, [email, duration], _flags, io) {
      if (duration === undefined) throw usage("user set-timeout EMAIL DURATION|default");
      const user = findUser(store, email);
      const timeout = duration === "default" ? null : toDuration(duration);
      store.setUserTimeout(user.id, timeout, io.clock.now());
      io.change({ user_id: user.id, token_timeout: timeout === null ? "default" : duration });
      io.stdout(
        `Token timeout of ${user.email} is now ${timeout === null ? "the default" : duration}`,
      );
    },
  },
  "user set-password": {
    usage: "user set-password EMAIL",
    options: [],
    async run(store, [email], _flags, io) {
      const user = findUser(store, email);
      const passwordHash = await io.hasher.hash(toPassword(await io.readPassword()));
      const revoked = store.setUserPassword(user.id, passwordHash, io.clock.now());
      io.change({ user_id: user.id, revoked_tokens: revoked });
      io.stdout(`Password of ${user.email} changed; ${revoked} live token(s) revoked`);
    },
  },
  "user disable": {
    usage: "user disable EMAIL",
    options: [],
    run(store, [email], _flags, io) {
      const user = findUser(store, email);
      const revoked = store.setUserDisabled(user.id, true, io.clock.now());
      io.change({ user_id: user.id, revoked_tokens: revoked });
      io.stdout(`Disabled ${user.email}; ${revoked} live token(s) revoked`);
    },
  },
  "user enable": {
    usage: "user enable EMAIL",
    options: [],
    run(store, [email], _flags, io) {
      const user = findUser(store, email);
      store.setUserDisabled(user.id, false, io.clock.now());
      io.change({ user_id: user.id });
      io.stdout(`Enabled ${user.email}`);
    },
  },
  "key create": {
    usage: "key create EMAIL [--label TEXT]",
    options: ["label"],
    run(store, [email], flags, io) {
      const user = findUser(store, email);
      const label = flags.label ?? "";
      if (label.length > 200) throw new AdminError("Label too long: at most 200 characters");
      const apiKey = generateApiKey();
      const key = store.insertApiKey(
        { userId: user.id, keyHash: hashSecret(apiKey), prefix: toKeyPrefix(apiKey), label },
        io.clock.now(),
      );
      io.change({ user_id: user.id, key_id: key.id });
      io.stdout(`Created API key ${key.id} for ${user.email}. It is shown only this once:`);
      io.stdout(apiKey);
    },
  },
  "key list": {
    usage: "key list [EMAIL] [--json]",
    options: ["json"],
    run(store, [email], flags, io) {
      const userId = email === undefined ? undefined : findUser(store, email).id;
      const keys = store.listApiKeys(userId).map((key) => ({
        id: key.id,
        key: `${key.prefix}…`,
        email: key.email,
        label: key.label,
        status: key.revokedAt === null ? "active" : "revoked",
        created_at: new Date(key.createdAt).toISOString(),
      }));
      printRows(io, keys, flags.json);
    },
  },
  "key revoke": {
    usage: "key revoke KEY_OR_ID",
    options: [],
    run(store, [keyOrId], _flags, io) {
      if (keyOrId === undefined) throw usage("key revoke KEY_OR_ID");
      const apiKey = normalizeApiKey(keyOrId.trim());
      const key = apiKey !== undefined
        ? store.findApiKeyByHash(hashSecret(apiKey))
        : /^[1-9][0-9]{0,15}$/.test(keyOrId)
        ? store.findApiKeyById(Number(keyOrId))
        : undefined;
      if (key === undefined) throw new AdminError("No such API key");
      if (key.revokedAt !== null) {
        io.stdout(`API key ${key.id} was already revoked`);
        return;
      }
      const revoked = store.revokeApiKey(key.id, io.clock.now());
      io.change({ user_id: key.userId, key_id: key.id, revoked_tokens: revoked });
      io.stdout(`Revoked API key ${key.id}; ${revoked} live token(s) revoked`);
    },
  },
  "token revoke-all": {
    usage: "token revoke-all EMAIL",
    options: [],
    run(store, [email], _flags, io) {
      const user = findUser(store, email);
      const revoked = store.revokeTokensOfUser(user.id, io.clock.now());
      io.change({ user_id: user.id, revoked_tokens: revoked });
      io.stdout(`Revoked ${revoked} live token(s) of ${user.email}`);
    },
  },
  "token purge": {
    usage: "token purge",
    options: [],
    run(store, _args, _flags, io) {
      const deleted = store.purgeTokens(io.clock.now());
      io.change({ deleted_tokens: deleted });
      io.stdout(`Deleted ${deleted} expired or revoked token row(s)`);
    },
  },
  "db backup": {
    usage: "db backup PATH",
    options: [],
    async run(store, [path], _flags, io) {
      if (path === undefined) throw usage("db backup PATH");
      if (exists(path)) throw new AdminError(`Cannot write backup: "${path}" already exists`);
      await store.backupTo(path);
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
    run(store, _args, _flags, io) {
      const problems = store.checkIntegrity();
      for (const problem of problems) io.stdout(problem);
      if (problems.length > 0) {
        throw new AdminError(`Integrity check failed: ${problems.length} problem(s)`);
      }
      io.stdout("Integrity check: ok");
    },
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

/** Who ran the command, as the operating system says. */
function findActor(env: AdminIO["env"]): string {
  return env.SUDO_USER ?? env.USER ?? env.LOGNAME ?? "unknown";
}

function usage(text: string): AdminError {
  return new AdminError(`Usage: deno task admin ${text}`, 2);
}

// deno-lint-ignore no-control-regex
const INVALID_EMAIL_CHARACTER = /[\s\x00-\x1f\x7f]/;

function toEmail(text: string | undefined): string {
  if (text === undefined) throw usage("user add EMAIL");
  const email = text.toLowerCase();
  if (
    email.length < 3 || email.length > MAX_EMAIL_LENGTH || !email.includes("@") ||
    INVALID_EMAIL_CHARACTER.test(email)
  ) {
    throw new AdminError(
      `Invalid e-mail "${
        text.slice(0, 64)
      }": expected an address of 3 to ${MAX_EMAIL_LENGTH} characters`,
    );
  }
  return email;
}

function toPassword(password: string): string {
  const bytes = new TextEncoder().encode(password).byteLength;
  if (bytes === 0 || bytes > MAX_PASSWORD_BYTES) {
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

function findUser(store: Store, email: string | undefined): User {
  if (email === undefined) throw new AdminError("Missing EMAIL argument", 2);
  const user = store.findUserByEmail(email.toLowerCase());
  if (user === undefined) throw new AdminError(`No user "${email.slice(0, 254)}"`);
  return user;
}

function describeTimeout(user: User): string {
  return user.tokenTimeoutSeconds === null ? "default" : formatDuration(user.tokenTimeoutSeconds);
}

function printRows(io: AdminIO, rows: Record<string, string | number>[], json?: boolean): void {
  if (json) {
    io.stdout(JSON.stringify(rows, null, 2));
    return;
  }
  if (rows.length === 0) {
    io.stdout("(none)");
    return;
  }
  const columns = Object.keys(rows[0]);
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (cells: string[]) =>
    cells.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd();
  io.stdout(line(columns.map((c) => c.toUpperCase())));
  for (const row of rows) io.stdout(line(columns.map((c) => String(row[c]))));
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
    hasher: overrides.hasher ?? createPasswordHasher({ concurrency: 1 }),
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
          help: { type: "boolean", short: "h" },
        },
      });
    } catch (error) {
      throw new AdminError(`${(error as Error).message} (see --help)`, 2);
    }
    const { values, positionals } = parsed;
    const name = positionals.slice(0, 2).join(" ");
    const command = COMMANDS[name];
    if (values.help || positionals.length === 0) {
      io.stdout(command ? `Usage: deno task admin ${command.usage} [--db PATH]` : HELP);
      return 0;
    }
    if (!command) throw new AdminError(`Unknown command "${name}" (see --help)`, 2);
    for (const option of ["json", "timeout", "label"] as const) {
      if (values[option] !== undefined && !command.options.includes(option)) {
        throw new AdminError(`Option --${option} does not apply to "${name}" (see --help)`, 2);
      }
    }
    const dbPath = values.db ?? io.env.KEYGATE_DB ?? DEFAULT_DB;
    store = openStore(dbPath);
    const audit: Logger = createLogger({
      level: "info",
      write: overrides.audit ?? io.stderr,
      clock: io.clock,
    });
    const change = (fields: LogFields) =>
      audit.info("admin change", {
        event: "admin_change",
        command: name,
        actor: findActor(io.env),
        db: dbPath,
        ...fields,
      });
    await command.run(store, positionals.slice(2), values, { ...io, change });
    return 0;
  } catch (error) {
    if (error instanceof AdminError) {
      io.stderr(`keygate admin: ${error.message}`);
      return error.exitCode;
    }
    io.stderr(`keygate admin: ${(error as Error).message ?? error}`);
    return 1;
  } finally {
    store?.close();
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
