/**
 * The admin CLI as the bench's sections use it (rate_limits.ts, production_mix.ts, mix_pairs.ts):
 * run in this process against a store, and the limits the sections with limits set on every key.
 *
 * @module
 */
import { main as admin } from "../../src/cli/main.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";

/** The default's rate: per minute (the shortest window a section measures), never refusing. */
export const BENCH_RATE = "1000000000/minute";
/** The default's quota: monthly, never refusing. */
export const BENCH_QUOTA = "1000000000000/month";

/**
 * Runs `deno task admin ARGS` in this process against `store`; resolves to what it printed, throws
 * on a failure.
 */
export async function runAdmin(store: string, args: string[]): Promise<string> {
  const hasher = createPasswordHasher({ workers: 1 });
  const out: string[] = [];
  try {
    const where = store.startsWith("postgres") ? "--store" : "--db";
    const code = await admin([...args, where, store], {
      env: { USER: "bench" },
      stdout: (text) => out.push(text),
      stderr: (text) => out.push(text),
      clock: systemClock,
      hasher,
    });
    if (code !== 0) throw new Error(`admin ${args.join(" ")}: ${out.join(" ")}`);
    return out.join("");
  } finally {
    hasher.close();
  }
}

/**
 * Sets the default's {@link BENCH_RATE} and {@link BENCH_QUOTA} on `store`: a limit on every key,
 * high enough never to refuse, so that every request is admitted through the limiter's leases.
 */
export async function setBenchLimits(store: string): Promise<void> {
  await runAdmin(store, ["limit", "set", "default", "--rate", BENCH_RATE]);
  await runAdmin(store, ["limit", "set", "default", "--quota", BENCH_QUOTA]);
}
