/**
 * `deno task bench:handler`: keygate's own cost per secure request, in
 * process (no TLS, no HTTP): the handler's time minus the time to build the
 * same requests. A guide between full `deno task bench` runs, whose figures
 * alone judge the targets.
 *
 * Usage: deno task bench:handler [ROUNDS]
 *
 * @module
 */
import { createHandler } from "../../src/http/app.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createKeyUsageRecorder } from "../../src/auth/key_usage.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { createMetrics } from "../../src/platform/metrics.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { seedDatabase } from "./seed.ts";

const ROUNDS = Number(Deno.args[0] ?? 5);
const PER_ROUND = 100_000;

const work = Deno.makeTempDirSync({ prefix: "keygate-handler-bench-" });
const hasher = createPasswordHasher();
const passwordHash = await hasher.hash("bench password");
hasher.close();
const { sample } = await seedDatabase(`${work}/db.sqlite3`, {
  tokens: 10_000,
  sample: 1000,
  passwordHash,
});
const store = openSqliteStore(`${work}/db.sqlite3`);
let logged = 0;
// Lines are built as in production, then counted rather than written.
const logger = createLogger({ level: "info", write: () => void logged++ });
const handle = createHandler({
  store,
  hasher,
  clock: systemClock,
  logger,
  defaultTimeoutSeconds: 36_000,
  keyUsage: createKeyUsageRecorder({ store, clock: systemClock, logger }),
  metrics: createMetrics(),
});

const origin = "https://127.0.0.1:8443";
const path = "/api/secure/userservice/tokens/current";
const info = { remoteAddr: { hostname: "127.0.0.1" } };
const shapes: Record<string, () => Request> = {
  query: () => {
    const e = sample[Math.floor(Math.random() * sample.length)];
    return new Request(`${origin}${path}?api_key=${e.apiKey}&api_token=${e.token}`);
  },
  bearer: () => {
    const e = sample[Math.floor(Math.random() * sample.length)];
    return new Request(`${origin}${path}`, {
      headers: { authorization: `Bearer ${e.token}`, "x-api-key": e.apiKey },
    });
  },
};

async function time(makeRequest: () => Request, serve: boolean): Promise<number> {
  const requests = Array.from({ length: PER_ROUND }, makeRequest);
  const started = performance.now();
  for (const request of requests) {
    if (!serve) {
      void request.url, request.headers.get("authorization");
      continue;
    }
    const response = await handle(request, info);
    if (response.status !== 200) throw new Error(`status ${response.status}`);
  }
  return (performance.now() - started) * 1000 / PER_ROUND;
}

for (const [name, makeRequest] of Object.entries(shapes)) {
  await time(makeRequest, true); // warm-up: fills the grant cache, compiles
  const costs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    costs.push(await time(makeRequest, true) - await time(makeRequest, false));
  }
  costs.sort((a, b) => a - b);
  console.log(
    `${name}: ${costs[0].toFixed(2)} µs best, ${costs[costs.length >> 1].toFixed(2)} µs median`,
  );
}
await store.closeStore();
Deno.removeSync(work, { recursive: true });
if (logged === 0) throw new Error("nothing was logged");
