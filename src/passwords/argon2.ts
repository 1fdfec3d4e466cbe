/**
 * argon2id with OWASP's parameters, synchronously: for the password workers
 * (src/password_worker.ts), where blocking is the point.
 *
 * @module
 */
import { hashSync, verifySync } from "@node-rs/argon2";

/** OWASP's argon2id parameters: 19 MiB, 2 iterations, parallelism 1. */
export const ARGON2_OPTIONS = {
  // `Algorithm.Argon2id`; the package's enum is an ambient const enum, unusable under isolatedModules.
  algorithm: 2,
  memoryCost: 19456,
  timeCost: 2,
  parallelism: 1,
} as const;

/** The argon2id PHC string for `password`. */
export function hashArgon2(password: string): string {
  return hashSync(password, ARGON2_OPTIONS);
}

/** Whether `password` matches the PHC string; a malformed string matches nothing. */
export function verifyArgon2(passwordHash: string, password: string): boolean {
  try {
    return verifySync(passwordHash, password);
  } catch {
    return false;
  }
}
