/**
 * The api_keys table: keys, their state, rotation and last use.
 *
 * @module
 */
import { StoreConflict } from "../errors.ts";
import type { ApiKey, ApiKeyStore, NewApiKey } from "../store.ts";
import type { Connection, Row } from "./connection.ts";
import { toApiKey, toExpiryOrNull } from "../rows.ts";
import { KEY_COLUMNS, KEY_USABLE } from "./rules.ts";
import { MAX_TIME_MS } from "../../platform/clock.ts";
import { createUserCheck } from "./user_check.ts";

export function createApiKeyStore(conn: Connection): ApiKeyStore {
  return {
    ...createKeyReads(conn),
    ...createKeyChanges(conn),
    ...createKeyUsageRecorder(conn),
  };
}

/** Keys found by digest or id, listed with their owner, and the gate's usable-key lookup. */
function createKeyReads(
  conn: Connection,
): Pick<ApiKeyStore, "findApiKeyByHash" | "findApiKeyById" | "listApiKeys" | "findKeyHolder"> {
  const { sql } = conn;
  const keyByHash = sql(`SELECT ${KEY_COLUMNS} FROM api_keys k WHERE k.key_hash = :key_hash`);
  const keyById = sql(`SELECT ${KEY_COLUMNS} FROM api_keys k WHERE k.id = :id`);
  const keysAll = sql(
    `SELECT ${KEY_COLUMNS}, u.email, u.disabled AS user_disabled FROM api_keys k
     JOIN users u ON u.id = k.user_id ORDER BY u.email, k.id`,
  );
  const keysOfUser = sql(
    `SELECT ${KEY_COLUMNS}, u.email, u.disabled AS user_disabled FROM api_keys k
     JOIN users u ON u.id = k.user_id WHERE k.user_id = :user_id ORDER BY k.id`,
  );
  // The API-key gate, introspection and revocation (see KEY_USABLE).
  const keyHolder = sql(
    `SELECT k.id AS api_key_id, k.user_id, u.email, k.introspect,
       min(k.expires_at, ${MAX_TIME_MS}) AS expires_at FROM api_keys k
     JOIN users u ON u.id = k.user_id
     WHERE k.key_hash = :key_hash AND ${KEY_USABLE}`,
  );

  return {
    findApiKeyByHash(keyHash) {
      return conn.read(() => {
        const row = keyByHash.get({ key_hash: keyHash }) as Row | undefined;
        return row && toApiKey(row);
      });
    },

    findApiKeyById(id) {
      return conn.read(() => {
        const row = keyById.get({ id }) as Row | undefined;
        return row && toApiKey(row);
      });
    },

    listApiKeys(userId) {
      return conn.read(() => {
        const rows = userId === undefined ? keysAll.all() : keysOfUser.all({ user_id: userId });
        return (rows as Row[]).map((row) => ({
          ...toApiKey(row),
          email: row.email as string,
          userDisabled: row.user_disabled === 1,
        }));
      });
    },

    findKeyHolder(keyHash, now) {
      return conn.read(() => {
        const row = keyHolder.get({ key_hash: keyHash, now }) as Row | undefined;
        if (!row) return undefined;
        return {
          apiKeyId: row.api_key_id as number,
          userId: row.user_id as number,
          email: row.email as string,
          introspect: row.introspect === 1,
          keyExpiresAt: toExpiryOrNull(row.expires_at),
        };
      });
    },
  };
}

/** A key's life: creation, revocation with its tokens, suspension and rotation. */
function createKeyChanges(
  conn: Connection,
): Pick<ApiKeyStore, "insertApiKey" | "revokeApiKey" | "updateApiKeyDisabled" | "rotateApiKey"> {
  const { sql } = conn;
  const requireUser = createUserCheck(conn);
  // Keeps grants: a new key has no tokens yet.
  const keyInsert = sql(
    `INSERT INTO api_keys (key_hash, prefix, user_id, label, introspect, created_at, expires_at)
     VALUES (:key_hash, :prefix, :user_id, :label, :introspect, :now, :expires_at) RETURNING *`,
    "keeps-grants",
  );
  const keysLiveCount = sql(
    "SELECT count(*) AS n FROM api_keys WHERE user_id = :user_id AND revoked_at IS NULL",
  );
  const keyRevoke = sql(
    "UPDATE api_keys SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL",
  );
  const tokensRevokeOfKey = sql(
    `UPDATE tokens SET revoked_at = :now
     WHERE api_key_id = :api_key_id AND revoked_at IS NULL AND expires_at > :now
       AND issued_at >= (SELECT u.tokens_valid_from FROM users u WHERE u.id = tokens.user_id)`,
  );
  const keySetDisabled = sql(
    "UPDATE api_keys SET disabled_at = :disabled_at WHERE id = :id AND revoked_at IS NULL",
  );
  // A rotation renews the credential and keeps its plan and what it has used: the old key's own
  // limits move to the successor, and the counters of those and of the default's limits with
  // them, so that the old key (until it ends) and the successor share one counter per limit and
  // no window starts anew (docs/architecture.md, "Rotation"). The old key's leases find them by
  // its chain (limits.ts). A counter left under the successor's id (none is: a deleted key's go
  // with it) is dropped first, so the move cannot collide with it.
  const limitsMoveToSuccessor = sql(
    `UPDATE limits SET api_key_id = :successor, updated_at = :now
     WHERE scope = 'key' AND api_key_id = :old`,
  );
  const countersOfSuccessor = `limit_id IN (SELECT id FROM limits
     WHERE scope = 'key' AND api_key_id = :successor OR scope = 'default')`;
  const countersClearOfSuccessor = sql(
    `DELETE FROM limit_usage WHERE subject_id = :successor AND ${countersOfSuccessor}`,
    "keeps-grants",
  );
  const countersMoveToSuccessor = sql(
    `UPDATE limit_usage SET subject_id = :successor
     WHERE subject_id = :old AND ${countersOfSuccessor}`,
    "keeps-grants",
  );
  const keySetReplaced = sql(
    `UPDATE api_keys SET replaced_by = :replaced_by,
       expires_at = min(coalesce(expires_at, :expires_at), :expires_at)
     WHERE id = :id AND replaced_by IS NULL AND revoked_at IS NULL`,
  );

  function insertKey(key: NewApiKey, now: number): ApiKey {
    return toApiKey(keyInsert.get({
      key_hash: key.keyHash,
      prefix: key.prefix,
      user_id: key.userId,
      label: key.label,
      introspect: key.introspect ? 1 : 0,
      now,
      expires_at: key.expiresAt ?? null,
    }) as Row);
  }

  return {
    insertApiKey(key, { now, audit, maxLiveKeys }) {
      return conn.write(() => {
        // In the write transaction (BEGIN IMMEDIATE): no deletion nor other insert between the
        // checks and the insert.
        requireUser(key.userId);
        if (maxLiveKeys !== undefined) {
          const { n } = keysLiveCount.get({ user_id: key.userId }) as { n: number };
          if (n >= maxLiveKeys) throw new StoreConflict(`The user holds ${n} keys already`);
        }
        return insertKey(key, now);
      }, audit);
    },

    revokeApiKey(id, { now, audit }) {
      return conn.write(() => {
        keyRevoke.run({ id, now });
        return Number(tokensRevokeOfKey.run({ api_key_id: id, now }).changes);
      }, audit);
    },

    updateApiKeyDisabled(id, { disabled, now, audit }) {
      return conn.write(
        () => Number(keySetDisabled.run({ id, disabled_at: disabled ? now : null }).changes) === 1,
        audit,
      );
    },

    rotateApiKey(oldKeyId, { successor, oldKeyExpiresAt, now, audit }) {
      return conn.write(() => {
        requireUser(successor.userId);
        const key = insertKey(successor, now);
        const { changes } = keySetReplaced.run({
          id: oldKeyId,
          replaced_by: key.id,
          expires_at: oldKeyExpiresAt,
        });
        // Another rotation or a revocation got there first: roll the successor back.
        if (Number(changes) !== 1) {
          throw new StoreConflict(`API key ${oldKeyId} was rotated, revoked or deleted meanwhile`);
        }
        limitsMoveToSuccessor.run({ successor: key.id, old: oldKeyId, now });
        countersClearOfSuccessor.run({ successor: key.id });
        countersMoveToSuccessor.run({ successor: key.id, old: oldKeyId });
        return key;
      }, audit);
    },
  };
}

/** Last use and use counts, written in batches by the key-usage flush. */
function createKeyUsageRecorder(conn: Connection): Pick<ApiKeyStore, "recordKeyUsage"> {
  const { sql } = conn;
  // Keeps grants: last use is bookkeeping, not part of a grant.
  const keyAddUsage = sql(
    `UPDATE api_keys SET
       last_used_from = CASE WHEN :at >= coalesce(last_used_at, 0) THEN :address
                        ELSE last_used_from END,
       last_used_at = max(coalesce(last_used_at, 0), :at),
       use_count = use_count + :count
     WHERE id = :id`,
    "keeps-grants",
  );

  return {
    async recordKeyUsage(usages) {
      if (usages.length === 0) return;
      await conn.write(() => {
        for (const usage of usages) {
          keyAddUsage.run({
            id: usage.apiKeyId,
            at: usage.lastUsedAt,
            address: usage.lastUsedFrom,
            count: usage.count,
          });
        }
      });
    },
  };
}
