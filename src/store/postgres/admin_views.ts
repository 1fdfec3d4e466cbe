/**
 * Operators of the admin API, and the paged listings it shows, on
 * PostgreSQL: the same contract as the SQLite backend's admin_views.ts
 * (pinned by tests/store/contract_admin.ts).
 *
 * @module
 */
import type { AdminStore, ApiKeyListing, TokenListing } from "../store.ts";
import { createAuditSearch } from "./audit_search.ts";
import type { PgContext } from "./db.ts";
import { type Row, toApiKey, toLoginFailures, toOperator, toTokenRow, toUser } from "../rows.ts";
import { tokenValid } from "./rows.ts";

const NO_CURSOR = Number.MAX_SAFE_INTEGER;

export function createAdminViewStore(db: PgContext): AdminStore {
  const searchAuditPage = createAuditSearch(db);
  return {
    ...createOperators(db),
    ...createListings(db),
    ...createLoginFailurePages(db),
    searchAuditPage,
    async searchAudit(query) {
      return (await searchAuditPage(query)).entries;
    },
  };
}

/** The admin API's operators: who may call it, found by their token's digest. */
function createOperators(
  db: PgContext,
): Pick<AdminStore, "insertOperator" | "findOperatorByHash" | "listOperators" | "revokeOperator"> {
  return {
    insertOperator(operator, change) {
      // Operators are not read by the gate: no write here ends a token grant.
      return db.write(async (tx) => {
        const [row] = await tx<Row[]>`
          INSERT INTO operators (name, role, token_hash, prefix, created_at)
          VALUES (${operator.name}, ${operator.role}, ${operator.tokenHash}, ${operator.prefix},
            ${change.now})
          RETURNING *`;
        return toOperator(row);
      }, { audit: change.audit, ends: () => [] });
    },

    async findOperatorByHash(tokenHash) {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM operators WHERE token_hash = ${tokenHash}`
      );
      return row && toOperator(row);
    },

    async listOperators() {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM operators ORDER BY name COLLATE "C", id`
      );
      return rows.map(toOperator);
    },

    revokeOperator(id, change) {
      return db.write(async (tx) => {
        const rows = await tx`UPDATE operators SET revoked_at = ${change.now}
          WHERE id = ${id} AND revoked_at IS NULL`;
        return rows.count === 1;
      }, { audit: change.audit, ends: () => [] });
    },
  };
}

/** Pages of users, of API keys with their owner, and of a user's tokens. */
function createListings(
  db: PgContext,
): Pick<AdminStore, "searchUsers" | "searchTokensOfUser" | "searchApiKeys"> {
  return {
    async searchUsers(query) {
      const search = (query.search ?? "").toLowerCase();
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM users
          WHERE email COLLATE "C" > ${query.afterEmail ?? ""}
            AND (${search} = '' OR strpos(email, ${search}) > 0)
          ORDER BY email COLLATE "C" LIMIT ${query.limit}`
      );
      return rows.map(toUser);
    },

    async searchTokensOfUser(userId, query) {
      const { now } = query;
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT t.id, t.api_key_id, t.issued_at, t.expires_at, t.revoked_at,
            (${tokenValid(sql, now)} AND t.expires_at > ${now}) AS live
          FROM tokens t JOIN api_keys k ON k.id = t.api_key_id JOIN users u ON u.id = t.user_id
          WHERE t.user_id = ${userId} AND t.id < ${query.beforeId ?? NO_CURSOR}
            ${query.liveOnly ? sql`AND ${tokenValid(sql, now)} AND t.expires_at > ${now}` : sql``}
          ORDER BY t.id DESC LIMIT ${query.limit}`
      );
      return rows.map((row): TokenListing => ({ ...toTokenRow(row), live: row.live === true }));
    },

    async searchApiKeys(query) {
      const { userId, unusedSince, after } = query;
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT k.*, u.email, u.disabled AS user_disabled FROM api_keys k
          JOIN users u ON u.id = k.user_id
          WHERE true
            ${userId === undefined ? sql`` : sql`AND k.user_id = ${userId}`}
            ${
          unusedSince === undefined
            ? sql``
            : sql`AND k.revoked_at IS NULL AND coalesce(k.last_used_at, k.created_at) <= ${unusedSince}`
        }
            ${
          after === undefined
            ? sql``
            : sql`AND (u.email COLLATE "C", k.id) > (${after.email}, ${after.id})`
        }
          ORDER BY u.email COLLATE "C", k.id LIMIT ${query.limit}`
      );
      return rows.map((row): ApiKeyListing => ({
        ...toApiKey(row),
        email: row.email as string,
        userDisabled: row.user_disabled === 1,
      }));
    },
  };
}

/** Pages of failed-login counters, the longest-blocked first, and how many block now. */
function createLoginFailurePages(
  db: PgContext,
): Pick<AdminStore, "searchLoginFailures" | "countBlockedSubjects"> {
  return {
    async searchLoginFailures(query) {
      const { now, after, limit } = query;
      // Counters ever blocked first, through their partial index in the page's order; then
      // those never blocked, by subject (as on SQLite).
      const rows = await db.read(async (sql) => {
        const select = sql`SELECT f.*, u.email FROM login_failures f
          LEFT JOIN api_keys k ON f.subject ~ '^key:[0-9]{1,18}$'
            AND k.id = CASE WHEN f.subject ~ '^key:[0-9]{1,18}$'
              THEN substr(f.subject, 5)::bigint END
          LEFT JOIN users u ON u.id = k.user_id`;
        const found = after !== undefined && after.blockedUntil === 0
          ? []
          : await sql<Row[]>`${select}
            WHERE f.blocked_until > 0 AND f.forget_at > ${now}
              ${
            after === undefined ? sql`` : sql`AND f.blocked_until <= ${after.blockedUntil}
              AND (f.blocked_until < ${after.blockedUntil}
                OR f.subject COLLATE "C" > ${after.subject})`
          }
            ORDER BY f.blocked_until DESC, f.subject COLLATE "C" LIMIT ${limit}`;
        if (found.length >= limit) return found;
        const afterSubject = after !== undefined && after.blockedUntil === 0 ? after.subject : "";
        return [
          ...found,
          ...await sql<Row[]>`${select}
            WHERE f.blocked_until = 0 AND f.forget_at > ${now}
              AND f.subject COLLATE "C" > ${afterSubject}
            ORDER BY f.subject COLLATE "C" LIMIT ${limit - found.length}`,
        ];
      });
      return rows.map((row) => ({
        ...toLoginFailures(row),
        ...(row.email === null ? {} : { email: row.email as string }),
      }));
    },

    async countBlockedSubjects(now) {
      const [{ n }] = await db.read((sql) =>
        sql<{ n: number }[]>`SELECT count(*)::int AS n FROM login_failures
          WHERE blocked_until > 0 AND blocked_until > ${now} AND forget_at > ${now}`
      );
      return n;
    },
  };
}
