/**
 * The login_failures table: the token endpoint's brute-force counters.
 * None of its writes can end a grant.
 *
 * @module
 */
import type { LoginFailureStore } from "../store.ts";
import type { Connection, Row } from "./connection.ts";
import { toLoginFailures } from "../rows.ts";

export function createLoginFailureStore(conn: Connection): LoginFailureStore {
  const { sql } = conn;
  const failuresBySubject = sql(
    "SELECT * FROM login_failures WHERE subject IN (:a, :b) AND forget_at > :now",
  );
  // Keeps grants: throttle counters are not read by the gate.
  const failuresUpsert = sql(
    `INSERT INTO login_failures (subject, failures, last_failure_at, blocked_until, forget_at)
     VALUES (:subject, :failures, :last_failure_at, :blocked_until, :forget_at)
     ON CONFLICT (subject) DO UPDATE SET failures = excluded.failures,
       last_failure_at = excluded.last_failure_at, blocked_until = excluded.blocked_until,
       forget_at = excluded.forget_at`,
    "keeps-grants",
  );
  // Keeps grants: throttle counters are not read by the gate.
  const failuresDelete = sql("DELETE FROM login_failures WHERE subject = :subject", "keeps-grants");
  const failuresLive = sql(
    "SELECT * FROM login_failures WHERE forget_at > :now ORDER BY blocked_until DESC, subject",
  );
  // Bounded, so that pruning never holds the write lock for long.
  // Keeps grants: throttle counters are not read by the gate.
  const failuresPrune = sql(
    `DELETE FROM login_failures WHERE subject IN (
       SELECT subject FROM login_failures WHERE forget_at <= :now LIMIT 100)`,
    "keeps-grants",
  );

  function findFailures(subjects: readonly string[], now: number) {
    if (subjects.length === 0) return [];
    if (subjects.length > 2) throw new RangeError("At most two subjects at once");
    const rows = failuresBySubject.all({ a: subjects[0], b: subjects.at(-1)!, now }) as Row[];
    return rows.map(toLoginFailures);
  }

  return {
    findLoginFailures(subjects, now) {
      return conn.read(() => findFailures(subjects, now));
    },

    recordLoginFailures(subjects, { now, next, audit }) {
      return conn.write(() => {
        const live = findFailures(subjects, now);
        const updated = subjects.map((subject) =>
          next(live.find((row) => row.subject === subject), subject)
        );
        for (const row of updated) {
          failuresUpsert.run({
            subject: row.subject,
            failures: row.failures,
            last_failure_at: row.lastFailureAt,
            blocked_until: row.blockedUntil,
            forget_at: row.forgetAt,
          });
        }
        failuresPrune.run({ now });
        return updated;
      }, audit);
    },

    listLoginFailures(now) {
      return conn.read(() => (failuresLive.all({ now }) as Row[]).map(toLoginFailures));
    },

    clearLoginFailures(subjects, { audit }) {
      return conn.write(
        () =>
          subjects.filter((subject) => Number(failuresDelete.run({ subject }).changes) === 1)
            .length,
        audit,
      );
    },
  };
}
