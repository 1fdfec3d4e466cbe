/**
 * The source of "now", passed in so tests can move time instead of sleeping.
 *
 * @module
 */

/** Gives the current time in milliseconds since the Unix epoch. */
export interface Clock {
  now(): number;
}

/**
 * The latest instant a JavaScript `Date` can hold (+275760-09-13): a stored
 * time beyond it (a row written before durations were capped, or by hand) is
 * read as this, so it can always be written as ISO 8601.
 */
export const MAX_TIME_MS = 8_640_000_000_000_000;

/** The real clock. */
export const systemClock: Clock = { now: () => Date.now() };
