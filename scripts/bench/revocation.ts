/**
 * Revocation propagation between two keygate instances on one database: a small client (not
 * wrk). For each of `count` tokens: two secure GETs on instance B (the grant now in B's cache),
 * a pause of random length (so that revocations fall at every phase of B's epoch poll), a
 * DELETE of the token through instance A; the clock starts when A's 204 has arrived (the
 * acknowledgement), and B is then asked again and again, one request at a time on one
 * keep-alive connection, until it answers 401. The latency is A's acknowledgement to B's first
 * 401 as the client receives it; nothing is subtracted, so one round trip to B is both the
 * loop's resolution and part of every sample.
 *
 * @module
 */
import type { SeedEntry } from "./seed.ts";

const SECURE_PATH = "/api/secure/userservice/tokens/current";

/** What {@link measureRevocations} saw. */
export interface RevocationResult {
  /** Acknowledgement to first 401, in ms, one per token. */
  latencies: number[];
  /** Round trips of B's answers (200s) inside the loops, in ms: the loop's resolution. */
  roundTrips: number[];
}

/** Options of {@link measureRevocations}. */
export interface RevocationOptions {
  /** Origins of the two instances. */
  a: string;
  b: string;
  /** Tokens to revoke, each once (fresh tokens, not used otherwise afterwards). */
  entries: SeedEntry[];
  /** The servers' certificate (self-signed), trusted for these requests only. */
  caCert: string;
  /** Longest random pause before each revocation, in ms. */
  maxPauseMs: number;
  /** Give up on one token after this long (a failure of the run, not a sample). */
  timeoutMs?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Revokes each entry's token through A and times how long B keeps accepting it. */
export async function measureRevocations(options: RevocationOptions): Promise<RevocationResult> {
  const timeoutMs = options.timeoutMs ?? 5000;
  // One client (one keep-alive connection) per instance.
  const clientA = Deno.createHttpClient({ caCerts: [options.caCert] });
  const clientB = Deno.createHttpClient({ caCerts: [options.caCert] });
  const latencies: number[] = [];
  const roundTrips: number[] = [];
  const ask = async (client: Deno.HttpClient, url: string, method = "GET") => {
    const response = await fetch(url, { method, client });
    await response.arrayBuffer();
    return response.status;
  };
  try {
    for (const entry of options.entries) {
      const path = `${SECURE_PATH}?api_key=${entry.apiKey}&api_token=${entry.token}`;
      for (let i = 0; i < 2; i++) {
        const status = await ask(clientB, options.b + path);
        if (status !== 200) throw new Error(`instance B answered ${status} before the revocation`);
      }
      await sleep(Math.random() * options.maxPauseMs);
      const revoked = await ask(clientA, options.a + path, "DELETE");
      if (revoked !== 204) throw new Error(`instance A answered ${revoked} to the revocation`);
      const acknowledged = performance.now();
      for (;;) {
        const sent = performance.now();
        const status = await ask(clientB, options.b + path);
        const now = performance.now();
        if (status === 401) {
          latencies.push(now - acknowledged);
          break;
        }
        if (status !== 200) throw new Error(`instance B answered ${status} while polled`);
        roundTrips.push(now - sent);
        if (now - acknowledged > timeoutMs) {
          throw new Error(`instance B still accepted a revoked token after ${timeoutMs} ms`);
        }
      }
    }
  } finally {
    clientA.close();
    clientB.close();
  }
  return { latencies, roundTrips };
}

/** The nearest-rank percentile `p` (0–100) of `values`. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.max(0, Math.ceil(p / 100 * sorted.length) - 1)];
}

/** One line for the report: samples, p50, p99, max and the loop's resolution. */
export function formatRevocations(result: RevocationResult, targetMs: number): string {
  const { latencies, roundTrips } = result;
  const ms = (n: number) => n === undefined ? "–" : `${n.toFixed(2)} ms`;
  const p99 = percentile(latencies, 99);
  return `${latencies.length} revocations: p50 ${ms(percentile(latencies, 50))}, ` +
    `**p99 ${ms(p99)}**, max ${ms(Math.max(...latencies))} ` +
    `(target p99 ≤ ${targetMs} ms: ${p99 <= targetMs ? "met" : "missed"}); ` +
    `poll loop resolution: one round trip to B, p50 ${ms(percentile(roundTrips, 50))}, ` +
    `${roundTrips.length} polls answered 200`;
}
