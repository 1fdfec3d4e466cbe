/**
 * `admin user …`: add, list, rename, set-timeout, set-password, disable,
 * enable and delete users.
 *
 * @module
 */
import { toUserRef } from "../../audit.ts";
import { formatDuration } from "../../duration.ts";
import type { User } from "../../store.ts";
import type { Command } from "../command.ts";
import { AdminError } from "../io.ts";
import { printRows } from "../output.ts";
import { findCanonicalUser, findUser, toDuration, toEmail, toPassword } from "../values.ts";

const EMAIL = { name: "EMAIL", description: "The user's e-mail address (any letter case)" };
const JSON_OPTION = {
  name: "json",
  kind: "boolean",
  description: "Print JSON instead of a table",
} as const;

function describeTimeout(user: User): string {
  return user.tokenTimeoutSeconds === null ? "default" : formatDuration(user.tokenTimeoutSeconds);
}

/** The `user` commands. */
export const USER_COMMANDS: readonly Command[] = [
  {
    words: ["user", "add"],
    summary: "Add a user; the password is read from standard input",
    description: "The first line of standard input is the password (on a terminal, a prompt " +
      "without echo). Creates the database if it does not exist.",
    arguments: [{ name: "EMAIL", description: "The new user's e-mail address" }],
    options: [{
      name: "timeout",
      kind: "value",
      placeholder: "DURATION",
      description: "The user's token lifetime (default: the server's --default-timeout)",
    }],
    readsPassword: true,
    database: "create",
    async run({ store, args, options, io, audit }) {
      const email = toEmail(args.EMAIL!);
      const timeout = options.timeout === undefined
        ? null
        : toDuration(options.timeout, "--timeout");
      // Rows written before e-mails were stored in NFC are compared in NFC too.
      const existing = findCanonicalUser(store, email);
      if (existing) {
        throw new AdminError(
          `User "${email}" already exists` +
            (existing.email === email ? "" : ` (as "${existing.email}", the same address in NFC)`),
        );
      }
      const passwordHash = await io.hasher.hash(toPassword(await io.readPassword()));
      const user = store.transaction(() => {
        const added = store.insertUser(
          { email, passwordHash, tokenTimeoutSeconds: timeout },
          io.clock.now(),
        );
        audit("user.added", toUserRef(added.email), { timeout: describeTimeout(added) });
        return added;
      });
      io.stdout(`Added user ${user.email} (id ${user.id}, token timeout ${describeTimeout(user)})`);
    },
  },
  {
    words: ["user", "list"],
    summary: "List users",
    arguments: [],
    options: [JSON_OPTION],
    database: "existing",
    run({ store, options, io }) {
      const users = store.listUsers().map((user) => ({
        id: user.id,
        email: user.email,
        token_timeout: describeTimeout(user),
        status: user.disabled ? "disabled" : "enabled",
        created_at: new Date(user.createdAt).toISOString(),
      }));
      printRows(io, users, options.json !== undefined);
    },
  },
  {
    words: ["user", "rename"],
    summary: "Change a user's e-mail; keys, tokens and timeout stay",
    arguments: [EMAIL, { name: "NEW_EMAIL", description: "The new e-mail address" }],
    options: [],
    database: "existing",
    run({ store, args, io, audit }) {
      const user = findUser(store, args.EMAIL!);
      const email = toEmail(args.NEW_EMAIL!);
      if (email === user.email) {
        io.stdout(`User ${user.email} already has that e-mail`);
        return;
      }
      const existing = findCanonicalUser(store, email);
      if (existing !== undefined && existing.id !== user.id) {
        throw new AdminError(
          `Cannot rename ${user.email}: user "${existing.email}" already exists`,
        );
      }
      store.transaction(() => {
        if (!store.renameUser(user.id, email, io.clock.now())) {
          throw new AdminError(`Cannot rename ${user.email}: user "${email}" already exists`);
        }
        audit("user.renamed", toUserRef(email), { from: user.email });
      });
      io.stdout(`Renamed user ${user.id} from ${user.email} to ${email}`);
    },
  },
  {
    words: ["user", "set-timeout"],
    summary: "Set the user's token lifetime",
    arguments: [EMAIL, {
      name: "DURATION",
      description: 'A lifetime such as 15m or 10h, or "default" for the server\'s default',
    }],
    options: [],
    database: "existing",
    run({ store, args, io, audit }) {
      const user = findUser(store, args.EMAIL!);
      const timeout = args.DURATION === "default" ? null : toDuration(args.DURATION!, "DURATION");
      store.transaction(() => {
        store.setUserTimeout(user.id, timeout, io.clock.now());
        audit("user.timeout_changed", toUserRef(user.email), {
          timeout: timeout === null ? "default" : formatDuration(timeout),
        });
      });
      io.stdout(
        `Token timeout of ${user.email} is now ${
          timeout === null ? "the default" : formatDuration(timeout)
        }`,
      );
    },
  },
  {
    words: ["user", "set-password"],
    summary: "Replace the password (standard input); revokes the user's tokens",
    arguments: [EMAIL],
    options: [],
    readsPassword: true,
    database: "existing",
    async run({ store, args, io, audit }) {
      const user = findUser(store, args.EMAIL!);
      const passwordHash = await io.hasher.hash(toPassword(await io.readPassword()));
      const revoked = store.transaction(() => {
        const n = store.setUserPassword(user.id, passwordHash, io.clock.now());
        audit("user.password_changed", toUserRef(user.email), { tokens_revoked: n });
        return n;
      });
      io.stdout(`Password of ${user.email} changed; ${revoked} live token(s) revoked`);
    },
  },
  {
    words: ["user", "disable"],
    summary: "Disable the user; revokes their tokens",
    arguments: [EMAIL],
    options: [],
    database: "existing",
    run({ store, args, io, audit }) {
      const user = findUser(store, args.EMAIL!);
      const revoked = store.transaction(() => {
        const n = store.setUserDisabled(user.id, true, io.clock.now());
        audit("user.disabled", toUserRef(user.email), { tokens_revoked: n });
        return n;
      });
      io.stdout(`Disabled ${user.email}; ${revoked} live token(s) revoked`);
    },
  },
  {
    words: ["user", "enable"],
    summary: "Enable the user again",
    arguments: [EMAIL],
    options: [],
    database: "existing",
    run({ store, args, io, audit }) {
      const user = findUser(store, args.EMAIL!);
      store.transaction(() => {
        store.setUserDisabled(user.id, false, io.clock.now());
        audit("user.enabled", toUserRef(user.email));
      });
      io.stdout(`Enabled ${user.email}`);
    },
  },
  {
    words: ["user", "delete"],
    summary: "Delete the user with their API keys and tokens (the audit log stays)",
    arguments: [EMAIL],
    options: [],
    database: "existing",
    run({ store, args, io, audit }) {
      const user = findUser(store, args.EMAIL!);
      const deleted = store.transaction(() => {
        const counts = store.deleteUser(user.id);
        audit("user.deleted", toUserRef(user.email), {
          api_keys_deleted: counts.apiKeys,
          tokens_deleted: counts.tokens,
        });
        return counts;
      });
      io.stdout(
        `Deleted user ${user.email} (id ${user.id}) with ${deleted.apiKeys} API key(s) and ` +
          `${deleted.tokens} token row(s)`,
      );
    },
  },
];
