/** A clock for tests: it moves only when told to. */
import type { Clock } from "../../src/platform/clock.ts";

/** A clock that only moves when told to. */
export interface FakeClock extends Clock {
  advance(ms: number): void;
  set(ms: number): void;
}

export function createFakeClock(start = Date.parse("2026-01-01T00:00:00Z")): FakeClock {
  let now = start;
  return {
    now: () => now,
    advance: (ms) => void (now += ms),
    set: (ms) => void (now = ms),
  };
}
