/**
 * Brute-force counters on PostgreSQL, shared by every instance: N
 * instances count into the same rows, so they do not multiply the
 * threshold by N. Each subject's row is locked while its failure is
 * counted, so concurrent failures on two instances both count.
 *
 * @module
 */
import type postgres from "postgres";
import type { LoginFailures, LoginFailureStore } from "../store.ts";
import type { PgContext } from "./db.ts";
import { type Row, toLoginFailures } from "../rows.ts";

/** Attempts to count one subject's failure when another instance keeps inserting it first. */
const MAX_INSERT_RACES = 3;

async function countFailure(
  tx: postgres.TransactionSql,
  subject: string,
  now: number,
  next: (previous: LoginFailures | undefined, subject: string) => LoginFailures,
): Promise<LoginFailures> {
  for (let attempt = 1;; attempt++) {
    const [row] = await tx<Row[]>`SELECT * FROM login_failures WHERE subject = ${subject}
      FOR UPDATE`;
    const live = row !== undefined && (row.forget_at as number) > now
      ? toLoginFailures(row)
      : undefined;
    const counted = next(live, subject);
    if (row !== undefined) {
      await tx`UPDATE login_failures SET failures = ${counted.failures},
          last_failure_at = ${counted.lastFailureAt}, blocked_until = ${counted.blockedUntil},
          forget_at = ${counted.forgetAt}
        WHERE subject = ${subject}`;
      return counted;
    }
    const inserted = await tx`INSERT INTO login_failures
        (subject, failures, last_failure_at, blocked_until, forget_at)
      VALUES (${subject}, ${counted.failures}, ${counted.lastFailureAt}, ${counted.blockedUntil},
        ${counted.forgetAt})
      ON CONFLICT (subject) DO NOTHING RETURNING subject`;
    if (inserted.length === 1) return counted;
    // Another instance inserted it meanwhile (and has committed): count on top of theirs.
    if (attempt >= MAX_INSERT_RACES) {
      throw new Error(`Cannot count a login failure for "${subject}": its row keeps changing`);
    }
  }
}

export function createLoginFailureStore(db: PgContext): LoginFailureStore {
  async function findLoginFailures(subjects: readonly string[], now: number) {
    if (subjects.length === 0) return [];
    if (subjects.length > 2) throw new RangeError("At most two subjects at once");
    const rows = await db.read((sql) =>
      sql<Row[]>`SELECT * FROM login_failures
        WHERE subject IN ${sql(subjects as string[])} AND forget_at > ${now}
        ORDER BY subject COLLATE "C"`
    );
    return rows.map(toLoginFailures);
  }

  return {
    findLoginFailures,

    recordLoginFailures(subjects, change) {
      if (subjects.length > 2) {
        return Promise.reject(new RangeError("At most two subjects at once"));
      }
      return db.write(async (tx) => {
        // Sorted: two instances counting the same pair lock its rows in the same order.
        const bySubject = new Map<string, LoginFailures>();
        for (const subject of [...new Set(subjects)].sort()) {
          bySubject.set(subject, await countFailure(tx, subject, change.now, change.next));
        }
        await tx`DELETE FROM login_failures WHERE subject IN (
            SELECT subject FROM login_failures WHERE forget_at <= ${change.now}
            LIMIT 100 FOR UPDATE SKIP LOCKED)`;
        return subjects.map((subject) => bySubject.get(subject)!);
      }, { audit: change.audit, ends: () => [], relaxed: () => true });
    },

    async listLoginFailures(now) {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM login_failures WHERE forget_at > ${now}
          ORDER BY blocked_until DESC, subject COLLATE "C"`
      );
      return rows.map(toLoginFailures);
    },

    clearLoginFailures(subjects, change) {
      return db.write(async (tx) => {
        if (subjects.length === 0) return 0;
        const rows = await tx`DELETE FROM login_failures
          WHERE subject IN ${tx(subjects as string[])} RETURNING subject`;
        return rows.length;
      }, { audit: change.audit, ends: () => [], relaxed: () => true });
    },
  };
}
