/**
 * Why writes to a SQLite database fail (SQLite's message, such as "database or disk is
 * full") for a reason a retry will not soon cure, until a write succeeds: what
 * `Store.findWriteFailure` answers, after a probe write of its own so that readiness
 * recovers without waiting for a client's write.
 *
 * @module
 */
import type { Connection } from "./connection.ts";
import { isDatabaseBusy, isDatabaseUnavailable } from "./errors.ts";

/** Rows of 128-character subjects a readiness probe writes: with their index, more than two pages. */
const PROBE_ROWS = 40;

/** A connection's last lasting write failure. */
export interface WriteFailures {
  /** Notes a failed write's reason, if a retry will not soon cure it. */
  note(error: unknown): void;
  /** A write succeeded. */
  clear(): void;
  /** The reason noted, after a probe write (run by `runProbe`) that may clear it. */
  find(runProbe: (probe: () => void) => void): string | undefined;
}

/** Tracks the failures of writes made through `sql`'s connection. */
export function createWriteFailures(sql: Connection["sql"]): WriteFailures {
  let writeFailure: string | undefined;
  // Keeps grants: throttle counters no login can have.
  const probeUpsert = sql(
    `INSERT INTO login_failures (subject, failures, last_failure_at, blocked_until, forget_at)
     VALUES (:subject, 1, 0, 0, 1) ON CONFLICT (subject) DO NOTHING`,
    "keeps-grants",
  );
  const probeDelete = sql("DELETE FROM login_failures WHERE subject = :subject", "keeps-grants");

  /**
   * Writes and removes throttle counters no login can have: whether the
   * database takes writes now. They fill more than two 4 KiB pages, so the
   * file must be able to grow.
   */
  function probeWrite(): void {
    const subjects = Array.from(
      { length: PROBE_ROWS },
      (_, i) => `probe:readiness:${i}:`.padEnd(128, "-"),
    );
    for (const subject of subjects) probeUpsert.run({ subject });
    for (const subject of subjects) probeDelete.run({ subject });
  }

  return {
    note(error: unknown): void {
      if (!isDatabaseBusy(error) && isDatabaseUnavailable(error)) {
        writeFailure = String((error as Error).message).slice(0, 200);
      }
    },
    clear(): void {
      writeFailure = undefined;
    },
    find(runProbe: (probe: () => void) => void): string | undefined {
      if (writeFailure === undefined) return undefined;
      try {
        runProbe(probeWrite);
        writeFailure = undefined;
      } catch (error) {
        if (!isDatabaseBusy(error)) writeFailure = String((error as Error).message).slice(0, 200);
      }
      return writeFailure;
    },
  };
}
