/**
 * The tokens table: {@link TokenStore} on SQLite — issuing with the live-token cap, the
 * secure path's lookup, introspection and revocation (retention is retention.ts).
 *
 * @module
 */
import type { TokenStore } from "../store.ts";
import { withTokenId } from "../audit_entries.ts";
import type { Connection, Row } from "./connection.ts";
import { toStoreError } from "./errors.ts";
import { StoreBlocked, StoreConflict } from "../errors.ts";
import { MAX_TIME_MS } from "../../platform/clock.ts";
import { toTokenFacts, toTokenRow } from "../rows.ts";
import { TOKEN_EXPIRES_AT, TOKEN_LIVE, TOKEN_VALID } from "./rules.ts";
import { createUserCutoff } from "./user_cutoff.ts";

export function createTokenStore(conn: Connection): TokenStore {
  return {
    ...createTokenIssuance(conn),
    ...createTokenLookups(conn),
    ...createTokenRevocations(conn),
  };
}

/** A login's token: unless blocked, only for the user as the login read it, under the cap. */
function createTokenIssuance(conn: Connection): Pick<TokenStore, "insertToken"> {
  const { sql } = conn;
  // Keeps grants: a new token ends no other (the cap is applied separately).
  const tokenInsert = sql(
    `INSERT INTO tokens (token_hash, user_id, api_key_id, issued_at, expires_at)
     VALUES (:token_hash, :user_id, :api_key_id, :issued_at, :expires_at)`,
    "keeps-grants",
  );
  // Keeps the newest `keep` live tokens of a user and key, revoking the rest. Trims grants:
  // every login runs it, and a login's answer says nothing about the tokens it leaves alone.
  const tokenRevokeBeyondCap = sql(
    `UPDATE tokens SET revoked_at = :now WHERE id IN (
       SELECT id FROM tokens
       WHERE user_id = :user_id AND api_key_id = :api_key_id
         AND revoked_at IS NULL AND expires_at > :now
       ORDER BY issued_at DESC, id DESC LIMIT -1 OFFSET :keep)`,
    "trims-grants",
  );
  // The user's cutoff and state, read inside the insert's transaction.
  const userCutoff = sql("SELECT tokens_valid_from, disabled FROM users WHERE id = :id");
  // The latest block among a login's counters that still blocks at :now.
  const failureBlock = sql(
    `SELECT max(blocked_until) AS blocked_until FROM login_failures
     WHERE subject IN (:a, :b) AND forget_at > :now AND blocked_until > :now`,
  );
  // Keeps grants: throttle counters are not read by the gate.
  const failuresDelete = sql("DELETE FROM login_failures WHERE subject = :subject", "keeps-grants");

  return {
    insertToken(token, { audit, clearLoginFailures, unlessBlocked }) {
      if ((unlessBlocked?.subjects.length ?? 0) > 2) {
        return Promise.reject(new RangeError("At most two subjects at once"));
      }
      return conn.write(() => {
        if (unlessBlocked !== undefined && unlessBlocked.subjects.length > 0) {
          const [a, b = a] = unlessBlocked.subjects;
          const { blocked_until } = failureBlock.get({ a, b, now: unlessBlocked.now }) as Row;
          if (blocked_until !== null) throw new StoreBlocked(blocked_until as number);
        }
        if (token.userCutoff !== undefined) {
          const user = userCutoff.get({ id: token.userId }) as Row | undefined;
          if (user === undefined || user.disabled || user.tokens_valid_from !== token.userCutoff) {
            throw new StoreConflict("The user changed while the login was checked");
          }
        }
        const { lastInsertRowid } = tokenInsert.run({
          token_hash: token.tokenHash,
          user_id: token.userId,
          api_key_id: token.apiKeyId,
          issued_at: token.issuedAt,
          expires_at: token.expiresAt,
        });
        tokenRevokeBeyondCap.run({
          user_id: token.userId,
          api_key_id: token.apiKeyId,
          now: token.issuedAt,
          keep: token.maxLiveTokens,
        });
        for (const subject of clearLoginFailures ?? []) failuresDelete.run({ subject });
        return Number(lastInsertRowid);
      }, (id) => withTokenId(audit, id));
    },
  };
}

/** The secure path's lookup, introspection, and the listings of tokens. */
function createTokenLookups(
  conn: Connection,
): Pick<TokenStore, "findTokenGrant" | "findTokenStatus" | "listTokensOfUser" | "countLiveTokens"> {
  const { sql } = conn;
  // The secure path's one statement: token, key, user and their states in one indexed read.
  // A token's effective expiry is capped by its key's (a rotated or expiring key takes its
  // tokens with it); tokens issued before the user's cutoff are invalid.
  const tokenGrant = sql(
    `SELECT t.id AS token_id, t.user_id, u.email, t.api_key_id, t.issued_at,
       min(t.expires_at, coalesce(k.expires_at, t.expires_at), ${MAX_TIME_MS}) AS expires_at,
       min(k.expires_at, ${MAX_TIME_MS}) AS key_expires_at
     FROM tokens t
     JOIN api_keys k ON k.id = t.api_key_id
     JOIN users u ON u.id = t.user_id
     WHERE t.token_hash = :token_hash AND k.key_hash = :key_hash AND ${TOKEN_VALID}`,
  );
  const tokenStatus = sql(
    `SELECT t.id AS token_id, t.user_id, u.email, t.api_key_id, t.issued_at,
       min(t.expires_at, coalesce(k.expires_at, t.expires_at), ${MAX_TIME_MS}) AS expires_at,
       (${TOKEN_VALID}) AS live
     FROM tokens t
     JOIN api_keys k ON k.id = t.api_key_id
     JOIN users u ON u.id = t.user_id
     WHERE t.token_hash = :token_hash`,
  );
  const tokensLive = sql(
    `SELECT count(*) AS n FROM tokens t
     JOIN api_keys k ON k.id = t.api_key_id
     JOIN users u ON u.id = t.user_id
     WHERE ${TOKEN_LIVE}`,
  );
  const tokensOfUser = sql(
    `SELECT t.id, t.api_key_id, t.issued_at, ${TOKEN_EXPIRES_AT} AS expires_at, t.revoked_at
     FROM tokens t WHERE t.user_id = :user_id ORDER BY t.issued_at DESC, t.id DESC`,
  );

  return {
    // The secure path on a cache miss: no async function, no closure, one statement.
    findTokenGrant({ tokenHash, keyHash, now }) {
      let row: Row | undefined;
      try {
        row = tokenGrant.get({ token_hash: tokenHash, key_hash: keyHash, now }) as Row | undefined;
      } catch (error) {
        return Promise.reject(toStoreError(error));
      }
      if (!row) return Promise.resolve(undefined);
      return Promise.resolve({
        ...toTokenFacts(row),
        keyExpiresAt: row.key_expires_at as number | null,
      });
    },

    findTokenStatus(tokenHash, now) {
      return conn.read(() => {
        const row = tokenStatus.get({ token_hash: tokenHash, now }) as Row | undefined;
        if (!row) return undefined;
        return { ...toTokenFacts(row), live: row.live === 1 };
      });
    },

    listTokensOfUser(userId) {
      return conn.read(() => (tokensOfUser.all({ user_id: userId }) as Row[]).map(toTokenRow));
    },

    countLiveTokens(now) {
      return conn.read(() => (tokensLive.get({ now }) as { n: number }).n);
    },
  };
}

/** Revoking one token, a key's token, or every token of a user (moving the user's cutoff). */
function createTokenRevocations(
  conn: Connection,
): Pick<TokenStore, "revokeToken" | "revokeTokenOfKey" | "revokeTokensOfUser"> {
  const { sql } = conn;
  const { nextCutoff, revokeTokensBefore } = createUserCutoff(conn);
  const tokenRevoke = sql(
    "UPDATE tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL",
  );
  const tokenRevokeOfKey = sql(
    `UPDATE tokens SET revoked_at = :now
     WHERE token_hash = :token_hash AND api_key_id = :api_key_id AND revoked_at IS NULL
     RETURNING id`,
  );

  return {
    revokeToken(tokenId, { now, audit }) {
      return conn.write(() => Number(tokenRevoke.run({ id: tokenId, now }).changes) === 1, audit);
    },

    revokeTokenOfKey(tokenHash, { apiKeyId, now, audit }) {
      return conn.write(() => {
        const row = tokenRevokeOfKey.get({ token_hash: tokenHash, api_key_id: apiKeyId, now }) as
          | Row
          | undefined;
        return row?.id as number | undefined;
      }, audit);
    },

    revokeTokensOfUser(userId, { before, now, audit }) {
      return conn.write(
        () => revokeTokensBefore(userId, before ?? nextCutoff(userId, now), now),
        audit,
      );
    },
  };
}
