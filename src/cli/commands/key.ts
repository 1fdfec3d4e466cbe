/**
 * `admin key …`: create, list, rotate, disable, enable and revoke API keys.
 * A key is referred to by its numeric id, an unambiguous prefix, or the whole key.
 *
 * @module
 */
import { toKeyRef } from "../../audit.ts";
import { generateApiKey, hashSecret, toKeyPrefix } from "../../credentials.ts";
import { toKeyStatus } from "../../key_status.ts";
import type { Command, CommandContext } from "../command.ts";
import { AdminError } from "../io.ts";
import { printRows, toIso, toIsoOrNull } from "../output.ts";
import { findKey, findUser, toDuration } from "../values.ts";

/** How long a rotated key keeps working when --grace is not given. */
export const DEFAULT_ROTATION_GRACE_SECONDS = 24 * 3600;

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
    run({ store, args, options, io, audit }) {
      const user = findUser(store, args.EMAIL!);
      const label = options.label ?? "";
      if (label.length > 200) throw new AdminError("Invalid --label: at most 200 characters", 2);
      const now = io.clock.now();
      const expiresAt = options.expires === undefined
        ? null
        : now + toDuration(options.expires, "--expires") * 1000;
      const apiKey = generateApiKey();
      const key = store.transaction(() => {
        const created = store.insertApiKey({
          userId: user.id,
          keyHash: hashSecret(apiKey),
          prefix: toKeyPrefix(apiKey),
          label,
          expiresAt,
          introspect: options.introspect !== undefined,
        }, now);
        audit("key.created", toKeyRef(created.id), {
          user: user.email,
          label,
          expires_at: toIsoOrNull(expiresAt),
          introspect: created.introspect ? 1 : 0,
        });
        return created;
      });
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
    run({ store, args, options, io }) {
      const userId = args.EMAIL === undefined ? undefined : findUser(store, args.EMAIL).id;
      const now = io.clock.now();
      const unusedSince = options.unused === undefined
        ? undefined
        : now - toDuration(options.unused, "--unused") * 1000;
      const keys = store.listApiKeys(userId)
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
    summary: "Issue a successor (same owner, label, lifetime); the old key ends after a grace",
    arguments: [KEY],
    options: [{
      name: "grace",
      kind: "value",
      placeholder: "DURATION",
      description: "How long the old key and its tokens keep working (default 24h; 0: now)",
    }],
    database: "existing",
    run({ store, args, options, io, audit }) {
      const { key: old, description } = findKey(store, args.KEY!);
      const now = io.clock.now();
      const status = toKeyStatus(old, now);
      if (status !== "active") {
        throw new AdminError(`Cannot rotate ${description}: it is ${status}`);
      }
      if (old.replacedBy !== null) {
        throw new AdminError(
          `Cannot rotate ${description}: it was already rotated to key ${old.replacedBy}`,
        );
      }
      const graceSeconds = options.grace === undefined
        ? DEFAULT_ROTATION_GRACE_SECONDS
        : options.grace === "0"
        ? 0
        : toDuration(options.grace, "--grace");
      const oldUntil = Math.min(old.expiresAt ?? Infinity, now + graceSeconds * 1000);
      // The successor keeps the old key's lifetime, counted from now.
      const expiresAt = old.expiresAt === null ? null : now + (old.expiresAt - old.createdAt);
      const apiKey = generateApiKey();
      const key = store.transaction(() => {
        const successor = store.rotateApiKey(old.id, {
          userId: old.userId,
          keyHash: hashSecret(apiKey),
          prefix: toKeyPrefix(apiKey),
          label: old.label,
          expiresAt,
          introspect: old.introspect,
        }, { oldKeyExpiresAt: oldUntil, now });
        audit("key.rotated", toKeyRef(old.id), {
          successor: successor.id,
          old_key_until: toIso(oldUntil),
        });
        audit("key.created", toKeyRef(successor.id), {
          user: store.findUserById(old.userId)?.email ?? "",
          label: old.label,
          expires_at: toIsoOrNull(expiresAt),
          rotated_from: old.id,
        });
        return successor;
      });
      io.stdout(
        `Rotated ${description} to ${key.id}; key ${old.id} and its tokens work until ` +
          `${toIso(oldUntil)}. The new key is shown only this once:`,
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
    run(context) {
      setKeyDisabled(context, true);
    },
  },
  {
    words: ["key", "enable"],
    summary: "Resume a disabled key",
    arguments: [KEY],
    options: [],
    database: "existing",
    run(context) {
      setKeyDisabled(context, false);
    },
  },
  {
    words: ["key", "revoke"],
    summary: "Revoke a key and the tokens issued with it, for good",
    arguments: [KEY],
    options: [],
    database: "existing",
    run({ store, args, io, audit }) {
      const { key, description } = findKey(store, args.KEY!);
      if (key.revokedAt !== null) {
        io.stdout(`${description} was already revoked`);
        return;
      }
      const revoked = store.transaction(() => {
        const n = store.revokeApiKey(key.id, io.clock.now());
        audit("key.revoked", toKeyRef(key.id), { tokens_revoked: n });
        return n;
      });
      io.stdout(`Revoked ${description}; ${revoked} live token(s) revoked`);
    },
  },
];

function setKeyDisabled({ store, args, io, audit }: CommandContext, disabled: boolean): void {
  const { key, description } = findKey(store, args.KEY!);
  if (key.revokedAt !== null) throw new AdminError(`${description} is revoked`);
  const changed = store.transaction(() => {
    const done = store.setApiKeyDisabled(key.id, disabled, io.clock.now());
    if (done && (key.disabledAt !== null) !== disabled) {
      audit(disabled ? "key.disabled" : "key.enabled", toKeyRef(key.id));
      return true;
    }
    return false;
  });
  const state = disabled ? "disabled" : "enabled";
  io.stdout(changed ? `${description} ${state}` : `${description} was already ${state}`);
}
