/**
 * `admin key …`: create, list, rotate, disable, enable and revoke API keys.
 * A key is referred to by its numeric id, an unambiguous prefix, or the whole key.
 *
 * @module
 */
import { toKeyStatus } from "../../auth/key_status.ts";
import {
  createKey,
  DEFAULT_ROTATION_GRACE_SECONDS,
  revokeKey,
  rotateKey,
  setKeyDisabled,
} from "../../auth/keys.ts";
import type { Command, CommandContext } from "../command.ts";
import { printRows, toIso, toIsoOrNull } from "../output.ts";
import { findKey, findUser, toDuration } from "../values.ts";

const KEY = {
  name: "KEY",
  description: "The key's numeric id (see key list), an unambiguous prefix of it, or the whole key",
};

/** The `key` commands. */
export const KEY_COMMANDS: readonly Command[] = [
  {
    words: ["key", "create"],
    summary: "Create an API key; it is printed once, alone on the last line",
    arguments: [{ name: "EMAIL", description: "The e-mail of the user who holds the key" }],
    options: [
      {
        name: "label",
        kind: "value",
        placeholder: "TEXT",
        description: "A note, up to 200 characters",
      },
      {
        name: "expires",
        kind: "value",
        placeholder: "DURATION",
        description: "The key stops working after this long (default: never)",
      },
      {
        name: "introspect",
        kind: "boolean",
        description: "A resource-server key that may call POST /api/userservice/tokens/introspect",
      },
      {
        name: "json",
        kind: "boolean",
        description: "Print one JSON object with the key and its id, for scripts",
      },
    ],
    database: "existing",
    async run({ store, args, options, io, changes }) {
      const user = await findUser(store, args.EMAIL!);
      const label = options.label ?? "";
      const expiresIn = options.expires === undefined
        ? undefined
        : toDuration(options.expires, "--expires");
      const { key, apiKey } = await createKey(changes, user, {
        label,
        expiresInSeconds: expiresIn,
        introspect: options.introspect !== undefined,
      });
      const expiresAt = key.expiresAt;
      if (options.json !== undefined) {
        io.stdout(JSON.stringify({
          id: key.id,
          key: apiKey,
          email: user.email,
          label,
          introspect: key.introspect,
          expires_at: toIsoOrNull(expiresAt),
        }));
        return;
      }
      const until = expiresAt === null ? "" : ` until ${toIso(expiresAt)}`;
      const kind = key.introspect ? "resource-server API key (may introspect tokens)" : "API key";
      io.stdout(`Created ${kind} ${key.id} for ${user.email}${until}. It is shown only this once:`);
      io.stdout(apiKey);
    },
  },
  {
    words: ["key", "list"],
    summary: "List keys (never whole keys) with status and last use",
    arguments: [{ name: "EMAIL", optional: true, description: "Only this user's keys" }],
    options: [
      {
        name: "unused",
        kind: "value",
        placeholder: "DURATION",
        description: "Only live keys not used for that long",
      },
      { name: "json", kind: "boolean", description: "Print JSON instead of a table" },
    ],
    database: "existing",
    async run({ store, args, options, io }) {
      const userId = args.EMAIL === undefined ? undefined : (await findUser(store, args.EMAIL)).id;
      const now = io.clock.now();
      const unusedSince = options.unused === undefined
        ? undefined
        : now - toDuration(options.unused, "--unused") * 1000;
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
      printRows(io, keys, options.json !== undefined);
    },
  },
  {
    words: ["key", "rotate"],
    summary:
      "Issue a successor (same owner, label, lifetime, limits); the old key ends after a grace",
    arguments: [KEY],
    options: [{
      name: "grace",
      kind: "value",
      placeholder: "DURATION",
      description: "How long the old key and its tokens keep working (default 24h; 0: now)",
    }],
    database: "existing",
    async run({ store, args, options, io, changes }) {
      const { key: old, description } = await findKey(store, args.KEY!);
      const graceSeconds = options.grace === undefined
        ? DEFAULT_ROTATION_GRACE_SECONDS
        : options.grace === "0"
        ? 0
        : toDuration(options.grace, "--grace");
      const { key, apiKey, oldKeyUntil } = await rotateKey(changes, old, graceSeconds);
      io.stdout(
        `Rotated ${description} to ${key.id}; key ${old.id} and its tokens work until ` +
          `${toIso(oldKeyUntil)}. The new key is shown only this once:`,
      );
      io.stdout(apiKey);
    },
  },
  {
    words: ["key", "disable"],
    summary: "Suspend a key and its tokens",
    arguments: [KEY],
    options: [],
    database: "existing",
    async run(context) {
      await changeKeyDisabled(context, true);
    },
  },
  {
    words: ["key", "enable"],
    summary: "Resume a disabled key",
    arguments: [KEY],
    options: [],
    database: "existing",
    async run(context) {
      await changeKeyDisabled(context, false);
    },
  },
  {
    words: ["key", "revoke"],
    summary: "Revoke a key and the tokens issued with it, for good",
    arguments: [KEY],
    options: [],
    database: "existing",
    async run({ store, args, io, changes }) {
      const { description, key } = await findKey(store, args.KEY!);
      const revoked = await revokeKey(changes, key);
      io.stdout(
        revoked === undefined
          ? `${description} was already revoked`
          : `Revoked ${description}; ${revoked} live token(s) revoked`,
      );
    },
  },
];

async function changeKeyDisabled(
  { store, args, io, changes }: CommandContext,
  disabled: boolean,
): Promise<void> {
  const { key, description } = await findKey(store, args.KEY!);
  const changed = await setKeyDisabled(changes, key, disabled);
  const state = disabled ? "disabled" : "enabled";
  io.stdout(changed ? `${description} ${state}` : `${description} was already ${state}`);
}
