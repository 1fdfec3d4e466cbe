/**
 * The limiter's own cost per secure request, in process (no TLS, no HTTP), in CPU time rather
 * than wall time so that a shared machine's load matters less: the real handler over three
 * copies of one SQLite database (KEYS keys, one token each, walked in order as the bench's Lua
 * walks its sampled tokens), one without limits, two with a default rate and quota as the
 * rate-limits section's (the rate per hour rather than per minute, so that no window ends in a
 * run: what a window's end costs is lease_cost.ts's), one of those with the `RateLimit` headers
 * switched off; measured in alternating rounds, the cost of building the requests taken off. Each
 * round lets the event loop turn every 1,000 requests, so the limiter's idle return (a timer)
 * runs as it does in a server. With
 * `KEYGATE_CPU_PROFILE=FILE`, the measured rounds are also profiled (V8's `.cpuprofile` JSON).
 * What `Deno.serve` adds per request (the HTTP/1 writes, TLS) is serve_cost.ts's. A guide
 * between `deno task bench` runs, whose figures alone judge the targets.
 *
 * Usage: deno run -A scripts/bench/limiter_cost.ts [ROUNDS [KEYS]]
 *
 * @module
 */
import { Session } from "node:inspector";
import process from "node:process";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { putDefaultLimits, startLimitedSide } from "./limited_side.ts";
import { seedDatabase } from "./seed.ts";

const ROUNDS = Number(Deno.args[0] ?? 7);
const KEYS = Number(Deno.args[1] ?? 10_000);
const PER_ROUND = 100_000;
/** Requests between two turns of the event loop (timers run then). */
const TURN_EVERY = 1000;
const PROFILE = Deno.env.get("KEYGATE_CPU_PROFILE");

/** Process CPU time (user and system, every thread), in ms. */
function cpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

const work = Deno.makeTempDirSync({ prefix: "keygate-limiter-cost-" });
const hasher = createPasswordHasher();
const passwordHash = await hasher.hash("bench password");
const { sample } = await seedDatabase(`${work}/plain.sqlite3`, {
  tokens: KEYS,
  sample: KEYS,
  passwordHash,
  tokensPerUser: 1,
});
for (const name of ["limited", "no-headers"]) {
  Deno.copyFileSync(`${work}/plain.sqlite3`, `${work}/${name}.sqlite3`);
  await putDefaultLimits(`${work}/${name}.sqlite3`);
}

const startSide = (name: string, limitHeaders: boolean) =>
  startLimitedSide(`${work}/${name}.sqlite3`, hasher, limitHeaders);

const sides = {
  "no limits": startSide("plain", true),
  "a rate and a quota on every key": startSide("limited", true),
  "the same, RateLimit headers off": startSide("no-headers", false),
};
const info = { remoteAddr: { hostname: "127.0.0.1" } };

let next = 0;
function makeRequest(): Request {
  const entry = sample[next++ % sample.length];
  return new Request(
    `https://127.0.0.1:8443/api/secure/userservice/tokens/current` +
      `?api_key=${entry.apiKey}&api_token=${entry.token}`,
  );
}

/** CPU µs per request of one round through `handle` (or, without it, of building them). */
async function round(handle?: (typeof sides)[keyof typeof sides]["handle"]): Promise<number> {
  const requests = Array.from({ length: PER_ROUND }, makeRequest);
  const started = cpuMs();
  let count = 0;
  for (const request of requests) {
    if (++count % TURN_EVERY === 0) await new Promise((resolve) => setTimeout(resolve, 0));
    if (handle === undefined) {
      void request.url;
      continue;
    }
    const response = await handle(request, info);
    if (response.status !== 200) throw new Error(`status ${response.status}`);
    await response.body?.cancel();
  }
  return (cpuMs() - started) * 1000 / PER_ROUND;
}

const session = new Session();
function post(method: string, params = {}): Promise<{ profile?: unknown }> {
  return new Promise((resolve, reject) =>
    session.post(
      method,
      params,
      (error, result) => error ? reject(error) : resolve((result ?? {}) as { profile?: unknown }),
    )
  );
}

// Warm: every key leased at once (the leases coalesce, as under a server's concurrent requests),
// then a round for caches and code.
for (const side of Object.values(sides)) {
  await Promise.all(
    sample.map(() => side.handle(makeRequest(), info).then((r) => r.body?.cancel())),
  );
  await round(side.handle);
}
if (PROFILE) {
  session.connect();
  await post("Profiler.enable");
  await post("Profiler.start");
}
const costs: Record<string, number[]> = {};
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, side] of Object.entries(sides)) {
    (costs[name] ??= []).push(await round(side.handle) - await round());
  }
}
if (PROFILE) {
  const { profile } = await post("Profiler.stop");
  Deno.writeTextFileSync(PROFILE, JSON.stringify(profile));
}
const load = Deno.loadavg().map((n) => n.toFixed(2)).join(" ");
console.log(
  `CPU µs per secure request, ${KEYS} keys, ${ROUNDS} rounds of ${PER_ROUND} (load ${load}):`,
);
for (const [name, values] of Object.entries(costs)) {
  values.sort((a, b) => a - b);
  const median = values[values.length >> 1];
  console.log(`  ${name}: ${values[0].toFixed(2)} best, ${median.toFixed(2)} median`);
}
for (const side of Object.values(sides)) await side.close();
hasher.close();
Deno.removeSync(work, { recursive: true });
