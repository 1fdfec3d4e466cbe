/**
 * Measures the password-hash limit: argon2id verifications per second through
 * keygate's own hasher, with as many in flight as the hasher runs at once.
 *
 * Usage: deno run -A scripts/bench/hash_rate.ts SECONDS
 * Prints `hashes_per_second N`.
 */
import { createPasswordHasher } from "../../src/passwords/passwords.ts";

const seconds = Number(Deno.args[0] ?? 5);
const hasher = createPasswordHasher();
const hash = await hasher.hash("bench password");
const concurrency = navigator.hardwareConcurrency;
let done = 0;
const deadline = performance.now() + seconds * 1000;
const started = performance.now();
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (performance.now() < deadline) {
    await hasher.verify(hash, "bench password");
    done++;
  }
}));
console.log(`hashes_per_second ${(done / ((performance.now() - started) / 1000)).toFixed(1)}`);
Deno.exit(0);
