/**
 * Operators of the admin API, and the paged listings it shows: users by
 * e-mail, a user's tokens, the audit log with filters (audit_search.ts).
 *
 * @module
 */
import type { AdminStore, ApiKeyListing, KeyQuery, TokenListing } from "../store.ts";
import { createAuditSearch } from "./audit_search.ts";
import type { Connection, Row } from "./connection.ts";
import { KEY_COLUMNS, TOKEN_EXPIRES_AT, TOKEN_LIVE } from "./rules.ts";
import { toApiKey, toLoginFailures, toOperator, toTokenRow, toUser } from "../rows.ts";

export function createAdminViewStore(conn: Connection): AdminStore {
  const searchAuditPage = createAuditSearch(conn);
  return {
    ...createOperators(conn),
    ...createListings(conn),
    ...createLoginFailurePages(conn),
    searchAuditPage,
    async searchAudit(query) {
      return (await searchAuditPage(query)).entries;
    },
  };
}

/** The admin API's operators: who may call it, found by their token's digest. */
function createOperators(
  conn: Connection,
): Pick<AdminStore, "insertOperator" | "findOperatorByHash" | "listOperators" | "revokeOperator"> {
  const { sql } = conn;
  // Operators are not read by the gate: none of these writes can end a token grant.
  const operatorInsert = sql(
    `INSERT INTO operators (name, role, token_hash, prefix, created_at)
     VALUES (:name, :role, :token_hash, :prefix, :now) RETURNING *`,
    "keeps-grants",
  );
  const operatorByHash = sql("SELECT * FROM operators WHERE token_hash = :token_hash");
  const operatorsAll = sql("SELECT * FROM operators ORDER BY name, id");
  const operatorRevoke = sql(
    "UPDATE operators SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL",
    "keeps-grants",
  );
  return {
    insertOperator(operator, change) {
      return conn.write(
        () =>
          toOperator(
            operatorInsert.get({
              name: operator.name,
              role: operator.role,
              token_hash: operator.tokenHash,
              prefix: operator.prefix,
              now: change.now,
            }) as Row,
          ),
        change.audit,
      );
    },
    findOperatorByHash(tokenHash) {
      return conn.read(() => {
        const row = operatorByHash.get({ token_hash: tokenHash }) as Row | undefined;
        return row === undefined ? undefined : toOperator(row);
      });
    },
    listOperators() {
      return conn.read(() => (operatorsAll.all() as Row[]).map(toOperator));
    },
    revokeOperator(id, change) {
      return conn.write(
        () => operatorRevoke.run({ id, now: change.now }).changes === 1,
        change.audit,
      );
    },
  };
}

/** Pages of users, of API keys with their owner, and of a user's tokens. */
function createListings(
  conn: Connection,
): Pick<AdminStore, "searchUsers" | "searchTokensOfUser" | "searchApiKeys"> {
  const { sql } = conn;
  const usersPage = sql(
    `SELECT * FROM users
     WHERE email > :after AND (:search = '' OR instr(email, :search) > 0)
     ORDER BY email LIMIT :limit`,
  );
  const tokensPage = sql(
    `SELECT t.id, t.api_key_id, t.issued_at, ${TOKEN_EXPIRES_AT} AS expires_at, t.revoked_at,
            (${TOKEN_LIVE}) AS live
     FROM tokens t JOIN api_keys k ON k.id = t.api_key_id JOIN users u ON u.id = t.user_id
     WHERE t.user_id = :user_id AND t.id < :before AND (:live_only = 0 OR (${TOKEN_LIVE}))
     ORDER BY t.id DESC LIMIT :limit`,
  );
  // One statement per combination of a key page's conditions, prepared on first use.
  const keyPages = new Map<string, ReturnType<typeof sql>>();
  function keyPage(query: KeyQuery) {
    const where = [
      query.userId === undefined ? "" : "k.user_id = :user_id",
      query.unusedSince === undefined
        ? ""
        : "k.revoked_at IS NULL AND coalesce(k.last_used_at, k.created_at) <= :since",
      query.after === undefined ? "" : "(u.email, k.id) > (:after_email, :after_id)",
    ].filter((part) => part !== "");
    const text = `SELECT ${KEY_COLUMNS}, u.email, u.disabled AS user_disabled FROM api_keys k
      JOIN users u ON u.id = k.user_id ${where.length === 0 ? "" : "WHERE"} ${where.join(" AND ")}
      ORDER BY u.email, k.id LIMIT :limit`;
    let statement = keyPages.get(text);
    if (statement === undefined) keyPages.set(text, statement = sql(text));
    return statement;
  }
  return {
    searchUsers(query) {
      return conn.read(() =>
        (usersPage.all({
          after: query.afterEmail ?? "",
          search: (query.search ?? "").toLowerCase(),
          limit: query.limit,
        }) as Row[]).map(toUser)
      );
    },
    searchTokensOfUser(userId, query) {
      return conn.read(() =>
        (tokensPage.all({
          user_id: userId,
          now: query.now,
          before: query.beforeId ?? Number.MAX_SAFE_INTEGER,
          live_only: query.liveOnly ? 1 : 0,
          limit: query.limit,
        }) as Row[]).map((row): TokenListing => ({ ...toTokenRow(row), live: row.live === 1 }))
      );
    },
    searchApiKeys(query) {
      return conn.read(() => {
        const params: Record<string, number | string> = { limit: query.limit };
        if (query.userId !== undefined) params.user_id = query.userId;
        if (query.unusedSince !== undefined) params.since = query.unusedSince;
        if (query.after !== undefined) {
          params.after_email = query.after.email;
          params.after_id = query.after.id;
        }
        return (keyPage(query).all(params) as Row[]).map((row): ApiKeyListing => ({
          ...toApiKey(row),
          email: row.email as string,
          userDisabled: row.user_disabled === 1,
        }));
      });
    },
  };
}

/** Pages of failed-login counters, the longest-blocked first, and how many block now. */
function createLoginFailurePages(
  conn: Connection,
): Pick<AdminStore, "searchLoginFailures" | "countBlockedSubjects"> {
  const { sql } = conn;
  // Counters ever blocked (blocked_until > 0) come first, through their partial index in
  // the page's order; then those never blocked, by subject (the primary key).
  const FAILURES = `SELECT f.*, u.email FROM login_failures f
     LEFT JOIN api_keys k
       ON f.subject GLOB 'key:[0-9]*' AND k.id = CAST(substr(f.subject, 5) AS INTEGER)
     LEFT JOIN users u ON u.id = k.user_id`;
  const blockedFirst = sql(
    `${FAILURES} WHERE f.blocked_until > 0 AND f.forget_at > :now
     ORDER BY f.blocked_until DESC, f.subject LIMIT :limit`,
  );
  const blockedAfter = sql(
    `${FAILURES} WHERE f.blocked_until > 0 AND f.forget_at > :now
       AND f.blocked_until <= :after_blocked
       AND (f.blocked_until < :after_blocked OR f.subject > :after_subject)
     ORDER BY f.blocked_until DESC, f.subject LIMIT :limit`,
  );
  const neverBlocked = sql(
    `${FAILURES} WHERE f.blocked_until = 0 AND f.forget_at > :now AND f.subject > :after_subject
     ORDER BY f.subject LIMIT :limit`,
  );
  const blockedCount = sql(
    `SELECT count(*) AS n FROM login_failures
     WHERE blocked_until > 0 AND blocked_until > :now AND forget_at > :now`,
  );

  return {
    searchLoginFailures(query) {
      return conn.read(() => {
        const { now, after, limit } = query;
        const rows = (after === undefined
          ? blockedFirst.all({ now, limit })
          : after.blockedUntil > 0
          ? blockedAfter.all({
            now,
            after_blocked: after.blockedUntil,
            after_subject: after.subject,
            limit,
          })
          : []) as Row[];
        if (rows.length < limit) {
          const afterSubject = after !== undefined && after.blockedUntil === 0 ? after.subject : "";
          rows.push(
            ...neverBlocked.all({
              now,
              after_subject: afterSubject,
              limit: limit - rows.length,
            }) as Row[],
          );
        }
        return (rows as Row[]).map((row) => ({
          ...toLoginFailures(row),
          ...(row.email === null ? {} : { email: row.email as string }),
        }));
      });
    },
    countBlockedSubjects(now) {
      return conn.read(() => (blockedCount.get({ now }) as { n: number }).n);
    },
  };
}
