/**
 * Durations as operators write them: `90s`, `15m`, `10h`, `7d`.
 *
 * @module
 */

const UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86400 };
const DURATION = /^([1-9][0-9]{0,8})([smhd])$/;

/**
 * The longest duration, 10000000d (about 27,000 years): now plus it stays a
 * time a `Date` can hold (±8.64e15 ms), so no expiry it makes breaks a response.
 */
export const MAX_DURATION_SECONDS = 10_000_000 * 86400;

/**
 * Parses a duration such as `90s`, `15m`, `10h` or `7d` into whole seconds.
 *
 * @throws {SyntaxError} when `text` is not a positive whole number followed by s, m, h or d,
 * or is longer than {@link MAX_DURATION_SECONDS}.
 */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text);
  if (!match) {
    throw new SyntaxError(
      `Cannot parse duration "${text}": expected a positive whole number and a unit s, m, h or d, like "10h"`,
    );
  }
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2]];
  if (seconds > MAX_DURATION_SECONDS) {
    throw new SyntaxError(`Cannot parse duration "${text}": at most 10000000d`);
  }
  return seconds;
}

/** Formats seconds in the largest unit that divides them evenly: 36000 → `10h`. */
export function formatDuration(seconds: number): string {
  for (const unit of ["d", "h", "m"]) {
    if (seconds % UNIT_SECONDS[unit] === 0) return `${seconds / UNIT_SECONDS[unit]}${unit}`;
  }
  return `${seconds}s`;
}
