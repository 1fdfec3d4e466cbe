/**
 * keygate with the example donations endpoint mounted in the same process.
 *
 * ```sh
 * deno task example:donations --port 8443
 * ```
 *
 * It takes the same flags and `KEYGATE_*` variables as `deno task start`,
 * and runs through keygate's own composition root (`serve()` in main.ts):
 * the same store, janitor, key-usage flush, metrics and shutdown deadline.
 *
 * @module
 */
import { serve } from "../../main.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createDonationLedger, createDonationRoutes } from "./donations.ts";

/** Runs keygate with the donations endpoint; resolves to the exit code. */
export function main(args: string[]): Promise<number> {
  return serve(args, Deno.env.toObject(), {
    name: "donations example",
    // The application's own secure endpoints: keygate authenticates, then calls them.
    secureRoutes: createDonationRoutes(createDonationLedger(), systemClock),
  });
}

if (import.meta.main) Deno.exit(await main(Deno.args));
