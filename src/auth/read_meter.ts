/**
 * Counts the data an operator reads through the admin API (users, keys,
 * tokens, the audit log), so that a bulk read (an export of every user and
 * key, page after page) leaves a trace in the audit log: one
 * `operator.bulk_read` entry when an operator's reads in one window reach
 * {@link BULK_READ_PAGES}, and one more at each further multiple. Not one row
 * per page: a console in daily use would bury the changes the audit log is
 * for. Every request is in the access log anyway (`admin_request` lines).
 *
 * The count is kept per process (each instance counts its own requests) and
 * starts over at a restart: it is a tripwire, not a quota.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";

/** Data reads by one operator within one window after which a bulk read is audited. */
export const BULK_READ_PAGES = 20;
/** The window over which {@link BULK_READ_PAGES} are counted. */
export const BULK_READ_WINDOW_MS = 3_600_000;
/** Operators tracked at most; beyond, windows that have ended are forgotten first. */
const MAX_TRACKED = 1024;

/** Options for {@link createReadMeter}. */
export interface ReadMeterOptions {
  clock: Clock;
  /** Default {@link BULK_READ_PAGES}. */
  pages?: number;
  /** Default {@link BULK_READ_WINDOW_MS}. */
  windowMs?: number;
}

/** A bulk read to audit: how many reads in the window that began at `since`. */
export interface BulkRead {
  pages: number;
  since: number;
}

/** Counts data reads per operator. */
export interface ReadMeter {
  /** Counts one read by `operatorId`; a {@link BulkRead} when it reaches a multiple of the limit. */
  count(operatorId: number): BulkRead | undefined;
}

/** Creates a meter of data reads per operator. */
export function createReadMeter(options: ReadMeterOptions): ReadMeter {
  const limit = options.pages ?? BULK_READ_PAGES;
  const windowMs = options.windowMs ?? BULK_READ_WINDOW_MS;
  const windows = new Map<number, BulkRead>();
  return {
    count(operatorId) {
      const now = options.clock.now();
      let window = windows.get(operatorId);
      if (window === undefined || now - window.since >= windowMs) {
        if (windows.size >= MAX_TRACKED) {
          for (const [id, old] of windows) if (now - old.since >= windowMs) windows.delete(id);
          if (windows.size >= MAX_TRACKED) windows.clear();
        }
        window = { pages: 0, since: now };
        windows.set(operatorId, window);
      }
      window.pages++;
      return window.pages % limit === 0 ? { ...window } : undefined;
    },
  };
}
