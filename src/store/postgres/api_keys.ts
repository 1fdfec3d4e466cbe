/**
 * API keys on PostgreSQL: creation, lookup, the usable-key rule,
 * revocation, suspension, rotation and usage counts.
 *
 * @module
 */
import type postgres from "postgres";
import { StoreConflict } from "../errors.ts";
import type { ApiKeyStore, KeyUsage, NewApiKey } from "../store.ts";
import { type PgContext, resolveAudit } from "./db.ts";
import { type Row, toApiKey, toExpiryOrNull } from "../rows.ts";
import { keyUsable, toIdArray } from "./rows.ts";
import { holdUser, lockUser } from "./user_lock.ts";

async function insertKeyRow(tx: postgres.TransactionSql, key: NewApiKey, now: number) {
  const [row] = await tx<Row[]>`
    INSERT INTO api_keys (key_hash, prefix, user_id, label, introspect, created_at, expires_at)
    VALUES (${key.keyHash}, ${key.prefix}, ${key.userId}, ${key.label}, ${key.introspect ? 1 : 0},
      ${now}, ${key.expiresAt ?? null})
    RETURNING *`;
  return toApiKey(row);
}

/** One entry per key: counts added, the latest use kept. */
export function mergeKeyUsages(usages: readonly KeyUsage[]): KeyUsage[] {
  const byId = new Map<number, KeyUsage>();
  for (const usage of usages) {
    const seen = byId.get(usage.apiKeyId);
    if (seen === undefined) {
      byId.set(usage.apiKeyId, { ...usage });
      continue;
    }
    seen.count += usage.count;
    if (usage.lastUsedAt >= seen.lastUsedAt) {
      seen.lastUsedAt = usage.lastUsedAt;
      seen.lastUsedFrom = usage.lastUsedFrom;
    }
  }
  // Sorted ids: every instance locks rows in the same order, so flushes never deadlock.
  return [...byId.values()].sort((a, b) => a.apiKeyId - b.apiKeyId);
}

export function createApiKeyStore(db: PgContext): ApiKeyStore {
  return {
    ...createKeyReads(db),
    ...createKeyChanges(db),
    ...createKeyUsageRecorder(db),
  };
}

/** Keys found by digest or id, listed with their owner, and the gate's usable-key lookup. */
function createKeyReads(
  db: PgContext,
): Pick<ApiKeyStore, "findApiKeyByHash" | "findApiKeyById" | "listApiKeys" | "findKeyHolder"> {
  return {
    async findApiKeyByHash(keyHash) {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM api_keys WHERE key_hash = ${keyHash}`
      );
      return row && toApiKey(row);
    },

    async findApiKeyById(id) {
      const [row] = await db.read((sql) => sql<Row[]>`SELECT * FROM api_keys WHERE id = ${id}`);
      return row && toApiKey(row);
    },

    async listApiKeys(userId) {
      const rows = await db.read((sql) =>
        userId === undefined
          ? sql<Row[]>`SELECT k.*, u.email, u.disabled AS user_disabled FROM api_keys k
              JOIN users u ON u.id = k.user_id ORDER BY u.email COLLATE "C", k.id`
          : sql<Row[]>`SELECT k.*, u.email, u.disabled AS user_disabled FROM api_keys k
              JOIN users u ON u.id = k.user_id WHERE k.user_id = ${userId} ORDER BY k.id`
      );
      return rows.map((row) => ({
        ...toApiKey(row),
        email: row.email as string,
        userDisabled: row.user_disabled === 1,
      }));
    },

    async findKeyHolder(keyHash, now) {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT k.id AS api_key_id, k.user_id, u.email, k.introspect, k.expires_at
          FROM api_keys k
          JOIN users u ON u.id = k.user_id
          WHERE k.key_hash = ${keyHash} AND ${keyUsable(sql, now)}`
      );
      if (row === undefined) return undefined;
      return {
        apiKeyId: row.api_key_id as number,
        userId: row.user_id as number,
        email: row.email as string,
        introspect: row.introspect === 1,
        keyExpiresAt: toExpiryOrNull(row.expires_at),
      };
    },
  };
}

/** A key's life: creation, revocation with its tokens, suspension and rotation. */
function createKeyChanges(
  db: PgContext,
): Pick<ApiKeyStore, "insertApiKey" | "revokeApiKey" | "updateApiKeyDisabled" | "rotateApiKey"> {
  return {
    insertApiKey(key, change) {
      return db.write(async (tx) => {
        // The user first, which refuses a user deleted meanwhile (StoreConflict, nothing
        // written). With a cap, its row lock orders concurrent inserts: each counts what the
        // last committed. Without one, holding the user is enough (nothing is counted), and the
        // user's keys made at once do not queue: a deletion (or a capped insert) locks the user
        // `FOR UPDATE`, so it still waits for this insert and then deletes (or counts) its key,
        // or comes first and refuses (or precedes) it.
        if (change.maxLiveKeys === undefined) await holdUser(tx, key.userId);
        else {
          await lockUser(tx, key.userId);
          const [{ n }] = await tx<Row[]>`SELECT count(*)::int AS n FROM api_keys
            WHERE user_id = ${key.userId} AND revoked_at IS NULL`;
          if (Number(n) >= change.maxLiveKeys) {
            throw new StoreConflict(`The user holds ${n} keys already`);
          }
        }
        return await insertKeyRow(tx, key, change.now);
      }, {
        audit: change.audit,
        ends: () => [],
      });
    },

    async revokeApiKey(id, change) {
      const { ended } = await db.write(async (tx) => {
        const revoked = await tx`UPDATE api_keys SET revoked_at = ${change.now}
          WHERE id = ${id} AND revoked_at IS NULL RETURNING id`;
        const tokens = await tx`UPDATE tokens SET revoked_at = ${change.now}
          WHERE api_key_id = ${id} AND revoked_at IS NULL AND expires_at > ${change.now}
            AND issued_at >= (SELECT u.tokens_valid_from FROM users u WHERE u.id = tokens.user_id)
          RETURNING id`;
        return { changed: revoked.length + tokens.length > 0, ended: tokens.length };
      }, {
        audit: (result) => resolveAudit(change.audit, result.ended),
        ends: (result) => result.changed ? [{ kind: "key", id }] : [],
      });
      return ended;
    },

    updateApiKeyDisabled(id, change) {
      return db.write(async (tx) => {
        const rows = await tx`UPDATE api_keys SET disabled_at = ${
          change.disabled ? change.now : null
        }
          WHERE id = ${id} AND revoked_at IS NULL RETURNING id`;
        return rows.length === 1;
      }, { audit: change.audit, ends: (changed) => changed ? [{ kind: "key", id }] : [] });
    },

    rotateApiKey(oldKeyId, change) {
      return db.write(async (tx) => {
        // The old key, then its user (a deletion's order): another rotation, a revocation or the
        // user's deletion that got there first refuses this one before anything is written.
        const [old] = await tx<Row[]>`SELECT id FROM api_keys
          WHERE id = ${oldKeyId} AND replaced_by IS NULL AND revoked_at IS NULL FOR UPDATE`;
        if (old === undefined) {
          throw new StoreConflict(`API key ${oldKeyId} was rotated, revoked or deleted meanwhile`);
        }
        await lockUser(tx, change.successor.userId);
        const successor = await insertKeyRow(tx, change.successor, change.now);
        await tx`UPDATE api_keys SET replaced_by = ${successor.id},
            expires_at = least(coalesce(expires_at, ${change.oldKeyExpiresAt}),
              ${change.oldKeyExpiresAt})
          WHERE id = ${oldKeyId}`;
        // A rotation renews the credential and keeps its plan and what it has used: the old
        // key's own limits move to the successor, and the counters of those and of the
        // default's limits with them, so that the old key (until it ends) and the successor
        // share one counter per limit and no window starts anew (docs/architecture.md,
        // "Rotation"). A lease holds its keys (FOR KEY SHARE) before it reads their chain and
        // touches a counter, and this rotation holds the old key FOR UPDATE: a lease of the old
        // key is wholly before the move (its counter moves with its units) or after it (it
        // finds the successor's). A limit's change locks the key, then the limit, as here.
        await tx`UPDATE limits SET api_key_id = ${successor.id}, updated_at = ${change.now}
          WHERE scope = 'key' AND api_key_id = ${oldKeyId}`;
        // The counters locked first in a lease's and a return's order (limit id, then subject).
        const moved = tx`subject_id = ${oldKeyId} AND limit_id IN (SELECT id FROM limits
            WHERE scope = 'key' AND api_key_id = ${successor.id} OR scope = 'default')`;
        await tx`SELECT 1 FROM limit_usage WHERE ${moved} ORDER BY limit_id FOR UPDATE`;
        await tx`UPDATE limit_usage SET subject_id = ${successor.id} WHERE ${moved}`;
        return successor;
      }, { audit: change.audit, ends: () => [{ kind: "key", id: oldKeyId }] });
    },
  };
}

/** A key's last use and use count to add, as `writeKeyUsage` writes them. */
export type KeyUsageRow = {
  id: number;
  at: number;
  address: string | null;
  count: number;
};

/**
 * Writes a batch of keys' last use and use counts, in its transaction. Locks the keys in id order
 * first (UPDATE ... FROM does not promise an order), `FOR NO KEY UPDATE`, the lock the UPDATE
 * takes: it does not wait for (nor hold up) a lease holding keys `FOR KEY SHARE` across rounds of
 * their rotation chains (limit_chains.ts), which `FOR UPDATE` would, in an order that can
 * deadlock. The ids go as an array ({@link toIdArray}): each key through the primary key, where a
 * JSON array unpacked in SQL had the planner scan the key table.
 */
export async function writeKeyUsage(
  tx: postgres.TransactionSql,
  usageRows: readonly KeyUsageRow[],
): Promise<void> {
  const ids = toIdArray(usageRows.map((row) => row.id));
  await tx`SELECT id FROM api_keys WHERE id = ANY(${ids}::bigint[]) ORDER BY id FOR NO KEY UPDATE`;
  await tx`UPDATE api_keys k SET
      last_used_from = CASE WHEN u.at >= coalesce(k.last_used_at, 0) THEN u.address
                       ELSE k.last_used_from END,
      last_used_at = greatest(coalesce(k.last_used_at, 0), u.at),
      use_count = k.use_count + u.count
    FROM jsonb_to_recordset(${tx.json(usageRows)})
      AS u(id bigint, at bigint, address text, count bigint)
    WHERE k.id = u.id AND k.id = ANY(${ids}::bigint[])`;
}

/** Last use and use counts, written in batches by the key-usage flush. */
function createKeyUsageRecorder(db: PgContext): Pick<ApiKeyStore, "recordKeyUsage"> {
  return {
    async recordKeyUsage(usages) {
      const merged = mergeKeyUsages(usages);
      if (merged.length === 0) return;
      const usageRows = merged.map((usage) => ({
        id: usage.apiKeyId,
        at: usage.lastUsedAt,
        address: usage.lastUsedFrom,
        count: usage.count,
      }));
      await db.write((tx) => writeKeyUsage(tx, usageRows), {
        ends: () => [],
        relaxed: () => true,
      });
    },
  };
}
