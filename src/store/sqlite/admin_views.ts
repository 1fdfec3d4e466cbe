/**
 * Operators of the admin API, and the paged listings it shows: users by
 * e-mail, a user's tokens, the audit log with filters.
 *
 * @module
 */
import type { AdminStore, AuditRecord, TokenListing } from "../store.ts";
import type { Connection, Row } from "./connection.ts";
import { TOKEN_EXPIRES_AT, TOKEN_LIVE } from "./rules.ts";
import { toOperator, toTokenRow, toUser } from "../rows.ts";

function toAuditRecord(row: Row): AuditRecord {
  return {
    id: row.id as number,
    at: row.at as number,
    actor: row.actor as string,
    action: row.action as string,
    subject: row.subject as string,
    detail: JSON.parse(row.detail as string),
  };
}

export function createAdminViewStore(conn: Connection): AdminStore {
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
  const auditPage = sql(
    `SELECT * FROM audit_log
     WHERE id < :before AND at >= :from AND at < :to
       AND (:actor IS NULL OR actor = :actor)
       AND (:action IS NULL OR action = :action)
       AND (:subject IS NULL OR subject = :subject)
     ORDER BY id DESC LIMIT :limit`,
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
    searchAudit(query) {
      return conn.read(() =>
        (auditPage.all({
          before: query.beforeId ?? Number.MAX_SAFE_INTEGER,
          from: query.from ?? 0,
          to: query.to ?? Number.MAX_SAFE_INTEGER,
          actor: query.actor ?? null,
          action: query.action ?? null,
          subject: query.subject ?? null,
          limit: query.limit,
        }) as Row[]).map(toAuditRecord)
      );
    },
  };
}
