/**
 * The dashboard's recent past: the admin figures (admin_tasks.ts) sampled
 * once a minute and kept in memory for an hour, so that a console opened
 * now shows the last hour's logins and failures per minute at once. The
 * samples belong to this process (its metric counters start at zero when it
 * starts) and are lost on restart; the metrics listener is the durable
 * record.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import type { AdminStats } from "./admin_tasks.ts";

/** Sampling interval. */
export const STATS_INTERVAL_MS = 60_000;
/** Samples kept: one hour. */
export const STATS_SAMPLES = 60;

/** What {@link createStatsHistory} needs. */
export interface StatsHistoryOptions {
  /** Reads the figures now (see `readAdminStats`). */
  read(): Promise<AdminStats>;
  clock: Clock;
  logger?: Logger;
  intervalMs?: number;
  size?: number;
}

/** A bounded, in-memory series of the admin figures. */
export interface StatsHistory {
  readonly intervalMs: number;
  /** Takes one sample now (the timer calls it); a failed read is logged and skipped. */
  sampleNow(): Promise<void>;
  /** The samples, oldest first. */
  list(): AdminStats[];
  /** Takes a first sample and then one per interval. */
  start(): void;
  stop(): void;
}

export function createStatsHistory(options: StatsHistoryOptions): StatsHistory {
  const intervalMs = options.intervalMs ?? STATS_INTERVAL_MS;
  const size = options.size ?? STATS_SAMPLES;
  const samples: AdminStats[] = [];
  let timer: ReturnType<typeof setInterval> | undefined;

  async function sampleNow(): Promise<void> {
    try {
      samples.push(await options.read());
      if (samples.length > size) samples.splice(0, samples.length - size);
    } catch (error) {
      options.logger?.warn("dashboard sample failed", { error: String(error) });
    }
  }

  return {
    intervalMs,
    sampleNow,
    list: () => [...samples],
    start() {
      if (timer !== undefined) return;
      void sampleNow();
      timer = setInterval(() => void sampleNow(), intervalMs);
      Deno.unrefTimer(timer);
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}
