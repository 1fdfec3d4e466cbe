/**
 * Password hashing and verification with argon2id, behind a concurrency limit.
 *
 * Hashing is deliberately slow (about 7 ms and 19 MiB each), so it is the
 * resource an attacker would exhaust: at most `concurrency` run at once, at
 * most `queue` more wait, and anything beyond is refused at once with 503.
 *
 * @module
 */
import { hash, verify } from "@node-rs/argon2";
import { HttpError } from "./errors.ts";

/** OWASP's argon2id parameters: 19 MiB, 2 iterations, parallelism 1. */
export const ARGON2_OPTIONS = {
  // `Algorithm.Argon2id`; the package's enum is an ambient const enum, unusable under isolatedModules.
  algorithm: 2,
  memoryCost: 19456,
  timeCost: 2,
  parallelism: 1,
} as const;

/** Hashes and verifies passwords. */
export interface PasswordHasher {
  /** Returns the argon2id PHC string for `password`. */
  hash(password: string): Promise<string>;
  /**
   * Whether `password` matches `passwordHash`. With `undefined` (unknown or
   * disabled user) it does the same work against a dummy hash and returns false.
   */
  verify(passwordHash: string | undefined, password: string): Promise<boolean>;
}

/** Options for {@link createPasswordHasher}. */
export interface PasswordHasherOptions {
  /** Hashes computed at once. Default: the number of CPUs. */
  concurrency?: number;
  /** Hashes allowed to wait for a slot; beyond this, 503. Default: 4 × concurrency. */
  queue?: number;
}

/** Seconds a caller is told to wait when hashing is saturated. */
export const BUSY_RETRY_AFTER_SECONDS = 1;

/** Creates a hasher that runs at most `concurrency` argon2id computations at once. */
export function createPasswordHasher(options: PasswordHasherOptions = {}): PasswordHasher {
  const concurrency = options.concurrency ?? navigator.hardwareConcurrency ?? 1;
  const limit = createLimiter(concurrency, options.queue ?? 4 * concurrency);
  let dummyHash: Promise<string> | undefined;

  return {
    hash: (password) => limit(() => hash(password, ARGON2_OPTIONS)),
    verify(passwordHash, password) {
      return limit(async () => {
        if (passwordHash !== undefined) return await verifyPhc(passwordHash, password);
        dummyHash ??= hash(crypto.randomUUID(), ARGON2_OPTIONS);
        await verifyPhc(await dummyHash, password);
        return false;
      });
    },
  };
}

async function verifyPhc(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    return false; // A malformed stored hash matches nothing.
  }
}

/**
 * Returns a function that runs async tasks at most `concurrency` at a time
 * with at most `queue` waiting, and rejects with 503 when both are full.
 */
export function createLimiter(
  concurrency: number,
  queue: number,
): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async function limit<T>(task: () => Promise<T>): Promise<T> {
    if (active >= concurrency) {
      if (waiting.length >= queue) {
        throw new HttpError(503, "service_busy", "Too many logins in progress: try again shortly", {
          headers: { "retry-after": String(BUSY_RETRY_AFTER_SECONDS) },
        });
      }
      await new Promise<void>((resolve) => waiting.push(resolve));
    } else {
      active++;
    }
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else active--;
    }
  };
}
