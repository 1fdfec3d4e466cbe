/**
 * The source of "now", passed in so tests can move time instead of sleeping.
 *
 * @module
 */

/** Gives the current time in milliseconds since the Unix epoch. */
export interface Clock {
  now(): number;
}

/** The real clock. */
export const systemClock: Clock = { now: () => Date.now() };
