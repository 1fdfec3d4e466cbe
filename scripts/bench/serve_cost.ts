/**
 * The per-request cost of limits through the whole server, in process and without wrk: the real
 * handler served by `Deno.serve` over HTTPS (TCP_NODELAY, as keygate listens) on this process's
 * main thread, loaded by a Web Worker (serve_cost_client.ts: HTTP/1.1 keep-alive, 50 requests
 * at once, each sampled token its own key, walked in order as the bench's Lua does). What is
 * measured is the CPU time of the main thread alone (`/proc/thread-self/schedstat`), so the
 * client's work is not in it, and the listener's Rust side (HTTP/1 writes, TLS) is.
 *
 * Five listeners on copies of one SQLite database (one key and one token per sampled key):
 * without limits; with a default rate and quota as the rate-limits section's (the rate per hour,
 * so that no window ends in a run); the same with the
 * `RateLimit` headers off; without limits but with two padding fields exactly as long as the
 * two `RateLimit` fields, which tells the cost of the fields' bytes through `Deno.serve` from the
 * cost of the limiter and the header values; and the same with a third padding field that takes
 * the head past 512 bytes, so that the answer leaves in one write instead of two (Deno 2.9's
 * writer: {@link PAST_512}), which tells what the second write costs. Measured in alternating
 * rounds; each round's CPU per request, best and median. A guide between `deno task bench` runs,
 * whose figures alone judge the targets.
 *
 * Usage: deno run -A scripts/bench/serve_cost.ts [KEYS [ROUNDS [REQUESTS_PER_ROUND]]]
 *
 * @module
 */
import type { Handler } from "../../src/http/app.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { setListenerNoDelay } from "../../src/platform/nodelay.ts";
import { generateSelfSigned } from "../../src/platform/tls.ts";
import type { ClientSetup } from "./serve_cost_client.ts";
import { putDefaultLimits, startLimitedSide } from "./limited_side.ts";
import { seedDatabase } from "./seed.ts";

const KEYS = Number(Deno.args[0] ?? 10_000);
const ROUNDS = Number(Deno.args[1] ?? 5);
const PER_ROUND = Number(Deno.args[2] ?? 30_000);
const CONCURRENCY = 50;

/** CPU time of the calling thread (the listener's, on the main thread), in µs. */
function threadCpuUs(): number {
  return Number(Deno.readTextFileSync("/proc/thread-self/schedstat").split(" ")[0]) / 1000;
}

const work = Deno.makeTempDirSync({ prefix: "keygate-serve-cost-" });
const hasher = createPasswordHasher();
const passwordHash = await hasher.hash("bench password");
const { sample } = await seedDatabase(`${work}/plain.sqlite3`, {
  tokens: KEYS,
  sample: KEYS,
  passwordHash,
  tokensPerUser: 1,
});
Deno.copyFileSync(`${work}/plain.sqlite3`, `${work}/limited.sqlite3`);
await putDefaultLimits(`${work}/limited.sqlite3`);
Deno.copyFileSync(`${work}/limited.sqlite3`, `${work}/no-headers.sqlite3`);
Deno.copyFileSync(`${work}/plain.sqlite3`, `${work}/padded.sqlite3`);
Deno.copyFileSync(`${work}/plain.sqlite3`, `${work}/padded-past.sqlite3`);

const { cert, key } = await generateSelfSigned();
const opened: { close(): Promise<void> }[] = [];

function createSide(name: string, limitHeaders: boolean): Handler {
  const side = startLimitedSide(`${work}/${name}.sqlite3`, hasher, limitHeaders);
  opened.push(side);
  return side.handle;
}

/** Serves `handle` on a port of its own; resolves to its origin. */
function serve(handle: Handler): Promise<string> {
  return new Promise((resolve) => {
    const server = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      cert,
      key,
      onListen({ port }) {
        if (setListenerNoDelay(port) === 0) throw new Error("Cannot set TCP_NODELAY");
        resolve(`https://127.0.0.1:${port}`);
      },
    }, (request, info) => handle(request, info));
    opened.push({ close: () => server.shutdown() });
  });
}

const limited = createSide("limited", true);
// The padding fields: as long as a limited answer's two fields, name and value.
const probe = await limited(
  new Request(
    `https://127.0.0.1/api/secure/userservice/tokens/current` +
      `?api_key=${sample[0].apiKey}&api_token=${sample[0].token}`,
  ),
  { remoteAddr: { hostname: "127.0.0.1" } },
);
await probe.body?.cancel();
const policyLength = probe.headers.get("ratelimit-policy")?.length ?? 0;
const statusLength = probe.headers.get("ratelimit")?.length ?? 0;
if (policyLength === 0 || statusLength === 0) throw new Error("No RateLimit fields on the probe");
/**
 * A side without limits whose answers carry padding fields: as long as a limited answer's two
 * fields, name and value ("ratelimit-policy" and "ratelimit"), and `past` more bytes in a third.
 */
function createPaddedSide(name: string, past = 0): Handler {
  const plain = createSide(name, true);
  return async (request, info) => {
    const response = await plain(request, info);
    response.headers.set("x-bench-padding1", "p".repeat(policyLength));
    response.headers.set("x-bench-p", "p".repeat(statusLength));
    if (past > 0) response.headers.set("x-bench-past", "p".repeat(past));
    return response;
  };
}

/**
 * Deno 2.9's HTTP/1.1 writer appends the body to the head only while both fit its per-connection
 * buffer of 512 bytes, and a head past 512 bytes grows that buffer to 1,024 (libs/http_h1, see
 * docs/performance.md): the same padding and this much more takes a limited answer's head past
 * 512 bytes, so that it leaves in one write where the padded side needs two.
 */
const PAST_512 = 80;

const sides: Record<string, string> = {
  "no limits": await serve(createSide("plain", true)),
  "a rate and a quota on every key": await serve(limited),
  "the same, RateLimit headers off": await serve(createSide("no-headers", false)),
  "no limits, two fields as long as RateLimit's": await serve(createPaddedSide("padded")),
  "no limits, the same fields and a head past 512 bytes (one write)": await serve(
    createPaddedSide("padded-past", PAST_512),
  ),
};

const client = new Worker(new URL("./serve_cost_client.ts", import.meta.url), { type: "module" });
function ask(message: unknown): Promise<{ failed?: number }> {
  return new Promise((resolve) => {
    client.onmessage = (event) => resolve(event.data);
    client.postMessage(message);
  });
}
const setup: ClientSetup = {
  caCert: cert,
  concurrency: CONCURRENCY,
  pairs: sample.map((entry) => [entry.apiKey, entry.token]),
};
await ask({ setup });

/** Main-thread CPU µs per request of `count` requests to `origin`. */
async function measure(origin: string, count: number): Promise<number> {
  const started = threadCpuUs();
  const { failed } = await ask({ origin, count });
  const used = threadCpuUs() - started;
  if (failed !== 0) throw new Error(`${failed} answers were not 200`);
  return used / count;
}

// Warm: every key leased, caches full, code optimised.
for (const origin of Object.values(sides)) await measure(origin, Math.max(KEYS * 2, PER_ROUND));
const costs: Record<string, number[]> = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, origin] of Object.entries(sides)) {
    (costs[name] ??= []).push(await measure(origin, PER_ROUND));
  }
}
const load = Deno.loadavg().map((n) => n.toFixed(2)).join(" ");
console.log(
  `Listener-thread CPU µs per secure request through Deno.serve over HTTPS, ${KEYS} keys, ` +
    `${ROUNDS} rounds of ${PER_ROUND} (load ${load}):`,
);
for (const [name, values] of Object.entries(costs)) {
  const sorted = [...values].sort((a, b) => a - b);
  console.log(
    `  ${name}: ${sorted[0].toFixed(2)} best, ${sorted[sorted.length >> 1].toFixed(2)} median ` +
      `(rounds ${values.map((v) => v.toFixed(1)).join(", ")})`,
  );
}
client.terminate();
for (const item of opened.reverse()) await item.close();
hasher.close();
Deno.removeSync(work, { recursive: true });
