/**
 * The benchmark's login burst as clients that honour `Retry-After`: N clients,
 * each sending one login at a time, the next as soon as a login is answered
 * 200 (so the queue stays N deep), and after a 503 only once its Retry-After
 * has passed, stretched by up to half again at random (the advice of
 * docs/operations.md, "Login bursts", so that a crowd refused together does
 * not come back together).
 *
 * Why not wrk: a wrk Lua script cannot wait per connection (wrk's `delay()`
 * holds every request of the thread and cannot see the answer it follows),
 * and a script that stops re-sending after a refusal would shrink the burst
 * instead of bringing it back later. Deno's `fetch` over one HTTP client
 * keeps one keep-alive connection per waiting login, as N browsers or
 * services would, and costs little: the clients spend most of their time
 * waiting for the server.
 *
 * Run as its own process (the benchmark pins it to the load generators' core
 * and reports its CPU share): `deno run --allow-net --allow-read
 * scripts/bench/burst_client.ts ORIGIN CA_FILE PAIRS_FILE CLIENTS SECONDS`. It prints one JSON
 * {@link BurstResult} line.
 *
 * @module
 */
import process from "node:process";

/** What a burst did, as the process prints it. */
export interface BurstResult {
  /** Logins answered, by status. */
  ok: number;
  refused: number;
  /** Other statuses, network errors and timeouts. */
  failed: number;
  /** Latency of the logins answered 200, in ms. */
  p50: number;
  p99: number;
  /** The Retry-After values the clients were told, smallest and largest, in seconds. */
  retryAfter: [number, number] | [];
  /** Wall time of the run, in seconds. */
  seconds: number;
  /** The client process's CPU time over its wall time (1 = one core busy throughout). */
  generatorShare: number;
}

/** The login's answer after this long counts as failed (the bound is 5 s by default). */
const TIMEOUT_MS = 30_000;
const TOKENS_PATH = "/api/userservice/tokens";
const PASSWORD = "bench password";

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0
    ? NaN
    : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

/** Runs `clients` clients against `origin` for `seconds`, cycling through the pairs' users. */
export async function runBurst(options: {
  origin: string;
  caCert: string;
  /** Lines "api_key token email", as the benchmark's pairs files. */
  pairs: { apiKey: string; email: string }[];
  clients: number;
  seconds: number;
}): Promise<BurstResult> {
  const client = Deno.createHttpClient({ caCerts: [options.caCert] });
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const deadline = started + options.seconds * 1000;
  const latencies: number[] = [];
  const retryAfters: number[] = [];
  let refused = 0;
  let failed = 0;
  let next = 0;

  async function loginOnce(): Promise<void> {
    const pair = options.pairs[next++ % options.pairs.length];
    const body = JSON.stringify({
      auth_request: { user: { email: pair.email, password: PASSWORD }, api_key: pair.apiKey },
    });
    const sent = performance.now();
    try {
      const response = await fetch(`${options.origin}${TOKENS_PATH}`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body,
        client,
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      await response.arrayBuffer();
      if (response.status === 200) {
        latencies.push(performance.now() - sent);
        return;
      }
      const retryAfter = Number(response.headers.get("retry-after"));
      if (response.status !== 503 || !(retryAfter >= 1)) {
        failed++;
        return;
      }
      refused++;
      retryAfters.push(retryAfter);
      // Back after Retry-After, up to half again at random; never beyond the run.
      const waitMs = Math.min(
        retryAfter * 1000 * (1 + Math.random() / 2),
        deadline - performance.now(),
      );
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    } catch {
      failed++;
    }
  }

  await Promise.all(Array.from({ length: options.clients }, async () => {
    while (performance.now() < deadline) await loginOnce();
  }));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  client.close();
  latencies.sort((a, b) => a - b);
  return {
    ok: latencies.length,
    refused,
    failed,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    retryAfter: retryAfters.length === 0
      ? []
      : [Math.min(...retryAfters), Math.max(...retryAfters)],
    seconds,
    generatorShare: (cpu.user + cpu.system) / 1e6 / seconds,
  };
}

/** Reads a pairs file ("api_key token email" per line). */
export async function readPairs(path: string): Promise<{ apiKey: string; email: string }[]> {
  return (await Deno.readTextFile(path)).split("\n").filter((line) => line.trim() !== "").map(
    (line) => {
      const [apiKey, , email] = line.split(" ");
      return { apiKey, email };
    },
  );
}

/**
 * Runs the burst client as its own process (pinned to `cores` with taskset when given), for
 * `seconds`, and returns what it printed.
 */
export async function runBurstProcess(options: {
  origin: string;
  caFile: string;
  pairsFile: string;
  clients: number;
  seconds: number;
  cores?: string;
}): Promise<BurstResult> {
  const argv = [
    Deno.execPath(),
    "run",
    "--allow-net",
    "--allow-read",
    new URL(import.meta.url).pathname,
    options.origin,
    options.caFile,
    options.pairsFile,
    String(options.clients),
    String(options.seconds),
  ];
  const command = options.cores === undefined ? argv : ["taskset", "-c", options.cores, ...argv];
  const output = await new Deno.Command(command[0], {
    args: command.slice(1),
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout).trim();
  if (!output.success) {
    throw new Error(`burst client failed: ${new TextDecoder().decode(output.stderr)}${text}`);
  }
  return JSON.parse(text.split("\n").at(-1)!) as BurstResult;
}

if (import.meta.main) {
  const [origin, caFile, pairsFile, clients, seconds] = Deno.args;
  const result = await runBurst({
    origin,
    caCert: await Deno.readTextFile(caFile),
    pairs: await readPairs(pairsFile),
    clients: Number(clients),
    seconds: Number(seconds),
  });
  console.log(JSON.stringify(result));
}
