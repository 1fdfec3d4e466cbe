/**
 * Tokens and grants on PostgreSQL: issuance with the live-token cap, the
 * secure path's lookup, introspection and every revocation.
 *
 * @module
 */
import { StoreBlocked, StoreConflict, StoreUnavailable } from "../errors.ts";
import type { TokenStore } from "../store.ts";
import { auditInsert, type PgContext, resolveAudit, toOwnChange } from "./db.ts";
import { commitAfter } from "./transaction.ts";
import { type Row, toTokenFacts, toTokenRow } from "../rows.ts";
import { createGrantReader } from "./grant_reads.ts";
import { tokenValid } from "./rows.ts";
import { raiseCutoff } from "./user_cutoff.ts";

/** What the token group needs beyond the shared context. */
export interface TokenStoreDeps {
  /** Whether the grant epoch is confirmed within the staleness bound (see grant_epoch.ts). */
  isEpochConfirmed: () => boolean;
}

export function createTokenStore(db: PgContext, deps: TokenStoreDeps): TokenStore {
  return {
    ...createTokenIssuance(db),
    ...createTokenLookups(db, deps),
    ...createTokenRevocations(db),
  };
}

/** A login's token: unless blocked, only for the user as the login read it, under the cap. */
function createTokenIssuance(db: PgContext): Pick<TokenStore, "insertToken"> {
  return {
    async insertToken(token, change) {
      const blockers = change.unlessBlocked?.subjects ?? [];
      if (blockers.length > 2) throw new RangeError("At most two subjects at once");
      const clear = change.clearLoginFailures ?? [];
      const entries = resolveAudit(change.audit, undefined);
      const written = await db.write(async (tx) => {
        // Two statements and the COMMIT in one round trip after the transaction's BEGIN
        // (pipelined, in this order: commitAfter): they run one after another; if the first
        // fails, the second fails with it, and the COMMIT rolls back. The COMMIT does not wait
        // for the answers, so a login that the first statement refuses (blocked, or the user
        // changed) commits too: it inserted nothing, and the second does nothing without the
        // token this transaction inserted.
        const ending = db.endingClauses(tx, {
          bump: tx`EXISTS (SELECT 1 FROM capped)`,
          relaxed: true,
          changes: tx`SELECT 'token'::text, id FROM capped`,
        });
        const [[stored], [ended]] = await commitAfter(tx, [
          // One login per key at a time (the key row's lock, taken first: the gate below is
          // evaluated before the users row is read), so that the cap in the next statement
          // counts what is really live. With it, the latest block among the login's counters:
          // its throttle check after the password's. Then the token, unless blocked, and only if
          // the user is as the login read it (the cutoff, when given): a change that committed
          // while the password was checked ends the login (no row inserted); one still to commit
          // waits for this one, and then moves its cutoff past this token (raiseCutoff). Keys
          // are locked before users, as deleteUser locks them, so the two never deadlock.
          // Then the audit rows, with the new token's id.
          tx<{ blocked_until: number | null; id: number | null }[]>`
            WITH locked AS (
              SELECT ${
            blockers.length === 0
              ? tx`NULL::bigint`
              : tx`(SELECT max(blocked_until) FROM login_failures
                  WHERE subject IN ${tx(blockers as string[])}
                    AND forget_at > ${change.unlessBlocked!.now}
                    AND blocked_until > ${change.unlessBlocked!.now})`
          } AS blocked_until
              FROM api_keys WHERE id = ${token.apiKeyId} FOR NO KEY UPDATE
            ), inserted AS (
              INSERT INTO tokens (token_hash, user_id, api_key_id, issued_at, expires_at)
              SELECT ${token.tokenHash}, id, ${token.apiKeyId}, ${token.issuedAt}, ${token.expiresAt}
              FROM (SELECT id FROM users
                WHERE id = ${token.userId} AND (${token.userCutoff ?? null}::bigint IS NULL
                  OR (tokens_valid_from = ${token.userCutoff ?? null} AND disabled = 0))
                FOR SHARE) AS unchanged
              WHERE (SELECT blocked_until FROM locked) IS NULL
              RETURNING id
            ), appended AS (${auditInsert(tx, entries, tx`inserted`)})
            SELECT (SELECT blocked_until FROM locked) AS blocked_until,
              (SELECT id FROM inserted) AS id`,
          // Only if the first statement inserted the token (a row with its hash: the hash is
          // random and unique, so a row with it is this login's, and a refused first statement
          // inserted none): keeps the newest maxLiveTokens live tokens of this user and key,
          // revoking the rest (the token just inserted among them: a statement of its own sees
          // it), clears
          // the key's failed-login counter, and ends the transaction: an epoch bump when the
          // cap ended a grant, else a commit that need not wait for the WAL flush.
          tx<{ capped: number[]; epoch: number | null; tag: number | null }[]>`
            WITH issued AS (
              SELECT 1 FROM tokens
              WHERE token_hash = ${token.tokenHash}
            ), capped AS (
              UPDATE tokens SET revoked_at = ${token.issuedAt} WHERE id IN (
                SELECT id FROM tokens
                WHERE user_id = ${token.userId} AND api_key_id = ${token.apiKeyId}
                  AND revoked_at IS NULL AND expires_at > ${token.issuedAt}
                ORDER BY issued_at DESC, id DESC OFFSET ${token.maxLiveTokens})
                AND EXISTS (SELECT 1 FROM issued)
              RETURNING id
            )${
            clear.length > 0
              ? tx`, cleared AS (DELETE FROM login_failures WHERE subject IN ${
                tx(clear as string[])
              } AND EXISTS (SELECT 1 FROM issued))`
              : tx``
          } ${ending.ctes}
            SELECT (SELECT coalesce(jsonb_agg(id ORDER BY id), '[]'::jsonb) FROM capped) AS capped,
              ${ending.columns}`,
        ]);
        // Nothing written: no token, so the cap and the counters were left alone.
        if (stored?.blocked_until != null) throw new StoreBlocked(stored.blocked_until);
        if (stored?.id == null) {
          throw new StoreConflict("The user is gone, or changed while the login was checked");
        }
        // Never a grant-ending commit without its bump (and so never a relaxed one).
        const scopes = ended.capped.map((id) => ({ kind: "token" as const, id: Number(id) }));
        return { id: Number(stored.id), own: toOwnChange(ended, scopes) };
      }, { recorded: (result) => result.own });
      return written.id;
    },
  };
}

/** The secure path's lookup, introspection, and the listings of tokens. */
function createTokenLookups(
  db: PgContext,
  deps: TokenStoreDeps,
): Pick<TokenStore, "findTokenGrant" | "findTokenStatus" | "listTokensOfUser" | "countLiveTokens"> {
  const findGrant = createGrantReader(db);
  return {
    findTokenGrant(lookup) {
      // Fail closed: while this instance cannot confirm the epoch, it answers nothing.
      if (!deps.isEpochConfirmed()) {
        return Promise.reject(
          new StoreUnavailable("Cannot confirm the grant epoch: database unreachable"),
        );
      }
      return findGrant(lookup);
    },

    async findTokenStatus(tokenHash, now) {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT t.id AS token_id, t.user_id, u.email, t.api_key_id, t.issued_at,
            least(t.expires_at, coalesce(k.expires_at, t.expires_at)) AS expires_at,
            (${tokenValid(sql, now)}) AS live
          FROM tokens t
          JOIN api_keys k ON k.id = t.api_key_id
          JOIN users u ON u.id = t.user_id
          WHERE t.token_hash = ${tokenHash}`
      );
      if (row === undefined) return undefined;
      return { ...toTokenFacts(row), live: row.live as boolean };
    },

    async countLiveTokens(now) {
      const [{ n }] = await db.read((sql) =>
        sql<{ n: number }[]>`SELECT count(*) AS n FROM tokens t
          JOIN api_keys k ON k.id = t.api_key_id
          JOIN users u ON u.id = t.user_id
          WHERE ${tokenValid(sql, now)} AND t.expires_at > ${now}`
      );
      return n;
    },

    async listTokensOfUser(userId) {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT id, api_key_id, issued_at, expires_at, revoked_at FROM tokens
          WHERE user_id = ${userId} ORDER BY issued_at DESC, id DESC`
      );
      return rows.map(toTokenRow);
    },
  };
}

/** Revoking one token, a key's token, or every token of a user (moving the user's cutoff). */
function createTokenRevocations(
  db: PgContext,
): Pick<TokenStore, "revokeToken" | "revokeTokenOfKey" | "revokeTokensOfUser"> {
  return {
    revokeToken(tokenId, change) {
      return db.write(async (tx) => {
        const rows = await tx`UPDATE tokens SET revoked_at = ${change.now}
          WHERE id = ${tokenId} AND revoked_at IS NULL RETURNING id`;
        return rows.length === 1;
      }, {
        audit: change.audit,
        ends: (revoked) => revoked ? [{ kind: "token", id: tokenId }] : [],
      });
    },

    revokeTokenOfKey(tokenHash, change) {
      return db.write(async (tx) => {
        const [row] = await tx<{ id: number }[]>`UPDATE tokens SET revoked_at = ${change.now}
          WHERE token_hash = ${tokenHash} AND api_key_id = ${change.apiKeyId}
            AND revoked_at IS NULL
          RETURNING id`;
        return row?.id;
      }, {
        audit: change.audit,
        ends: (id) => id === undefined ? [] : [{ kind: "token", id }],
      });
    },

    revokeTokensOfUser(userId, change) {
      return db.write((tx) => raiseCutoff(tx, userId, change.now, change.before), {
        audit: change.audit,
        ends: () => [{ kind: "user", id: userId }],
      });
    },
  };
}
