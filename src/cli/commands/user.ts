/**
 * `admin user …`: add, list, rename, set-timeout, set-password, disable,
 * enable and delete users.
 *
 * @module
 */
import {
  addUser,
  changeUserPassword,
  changeUserTimeout,
  deleteUser,
  describeTimeout,
  renameUser,
  setUserDisabled,
  toAccountEmail,
} from "../../auth/users.ts";
import { formatDuration } from "../../platform/duration.ts";
import type { Command } from "../command.ts";
import { printRows } from "../output.ts";
import { findUser, toDuration, toPassword } from "../values.ts";

const EMAIL = { name: "EMAIL", description: "The user's e-mail address (any letter case)" };
const JSON_OPTION = {
  name: "json",
  kind: "boolean",
  description: "Print JSON instead of a table",
} as const;

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
    async run({ args, options, io, changes }) {
      // A bad address or timeout is refused before the password is asked for.
      const email = toAccountEmail(args.EMAIL!);
      const timeout = options.timeout === undefined
        ? null
        : toDuration(options.timeout, "--timeout");
      const password = toPassword(await io.readPassword());
      const user = await addUser({ ...changes, hasher: io.hasher }, {
        email,
        password,
        tokenTimeoutSeconds: timeout,
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
    async run({ store, options, io }) {
      const users = (await store.listUsers()).map((user) => ({
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
    async run({ store, args, io, changes }) {
      const user = await findUser(store, args.EMAIL!);
      const email = await renameUser(changes, user, args.NEW_EMAIL!);
      io.stdout(
        email === user.email
          ? `User ${user.email} already has that e-mail`
          : `Renamed user ${user.id} from ${user.email} to ${email}`,
      );
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
    async run({ store, args, io, changes }) {
      const user = await findUser(store, args.EMAIL!);
      const timeout = args.DURATION === "default" ? null : toDuration(args.DURATION!, "DURATION");
      await changeUserTimeout(changes, user, timeout);
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
    async run({ store, args, io, changes }) {
      const user = await findUser(store, args.EMAIL!);
      const password = toPassword(await io.readPassword());
      const revoked = await changeUserPassword({ ...changes, hasher: io.hasher }, user, password);
      io.stdout(`Password of ${user.email} changed; ${revoked} live token(s) revoked`);
    },
  },
  {
    words: ["user", "disable"],
    summary: "Disable the user; revokes their tokens",
    arguments: [EMAIL],
    options: [],
    database: "existing",
    async run({ store, args, io, changes }) {
      const user = await findUser(store, args.EMAIL!);
      const revoked = await setUserDisabled(changes, user, true);
      io.stdout(`Disabled ${user.email}; ${revoked} live token(s) revoked`);
    },
  },
  {
    words: ["user", "enable"],
    summary: "Enable the user again",
    arguments: [EMAIL],
    options: [],
    database: "existing",
    async run({ store, args, io, changes }) {
      const user = await findUser(store, args.EMAIL!);
      await setUserDisabled(changes, user, false);
      io.stdout(`Enabled ${user.email}`);
    },
  },
  {
    words: ["user", "delete"],
    summary: "Delete the user with their API keys and tokens (the audit log stays)",
    arguments: [EMAIL],
    options: [],
    database: "existing",
    async run({ store, args, io, changes }) {
      const user = await findUser(store, args.EMAIL!);
      const deleted = await deleteUser(changes, user);
      io.stdout(
        `Deleted user ${user.email} (id ${user.id}) with ${deleted.apiKeys} API key(s) and ` +
          `${deleted.tokens} token row(s)`,
      );
    },
  },
];
