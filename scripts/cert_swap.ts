/**
 * Measures certificate reloads under load, as the process an operator runs:
 * keygate (`--workers 1`, then `--workers 2`) on two fresh certificates, `wrk`
 * with 50 keep-alive connections on `GET /healthz`, and `--swaps` reloads by
 * SIGHUP (new files renamed into place, then the signal). After each reload
 * (seen in `/metrics`) a new connection must get the new certificate; at the
 * end a mismatched pair must change nothing. Prints wrk's totals and socket
 * errors, the reload times and the count of wrong certificates, per run.
 *
 *     deno task cert-swap [--swaps 100] [--workers 1,2]
 *
 * Needs `wrk` on PATH; loopback only.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { makePairs, type Pair, servedPair } from "../tests/_helpers/tls_load.ts";
import { findFreePort } from "../tests/_helpers/free_port.ts";

const args = parseArgs({
  args: Deno.args,
  options: {
    swaps: { type: "string", default: "100" },
    workers: { type: "string", default: "1,2" },
  },
});
const SWAPS = Number(args.values.swaps);
const ROOT = new URL("../", import.meta.url).pathname;

async function writePair(dir: string, pair: Pair): Promise<void> {
  await Deno.writeTextFile(`${dir}/key.pem.new`, pair.key);
  await Deno.rename(`${dir}/key.pem.new`, `${dir}/key.pem`);
  await Deno.writeTextFile(`${dir}/cert.pem.new`, pair.cert);
  await Deno.rename(`${dir}/cert.pem.new`, `${dir}/cert.pem`);
}

async function reloads(metricsPort: number, outcome: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text.split("\n").find((line) =>
    line.startsWith(`keygate_tls_certificate_reloads_total{outcome="${outcome}"}`)
  );
  return Number(line?.split(" ").at(-1) ?? NaN);
}

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    try {
      if (await check()) return true;
    } catch {
      // Not up yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}

async function run(workers: number): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "keygate-cert-swap-" });
  const pairs = await makePairs(2);
  await writePair(dir, pairs[0]);
  const port = findFreePort();
  const metricsPort = findFreePort();
  const server = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--unstable-net",
      "--allow-net",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-ffi",
      "--allow-sys",
      `${ROOT}main.ts`,
      ...["--hostname", "127.0.0.1", "--port", String(port), "--db", `${dir}/keygate.sqlite3`],
      ...["--cert", `${dir}/cert.pem`, "--key", `${dir}/key.pem`, "--workers", String(workers)],
      ...["--metrics", "--metrics-port", String(metricsPort), "--cert-reload-interval", "0"],
      ...["--log-level", "warn"],
    ],
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  try {
    if (!await until(async () => await reloads(metricsPort, "reloaded") === 0, 20_000)) {
      throw new Error("keygate did not start");
    }
    const wrk = new Deno.Command("wrk", {
      args: ["-t2", "-c50", "-d600s", `https://127.0.0.1:${port}/healthz`],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    await new Promise((resolve) => setTimeout(resolve, 2000)); // load before the first swap
    const times: number[] = [];
    let wrong = 0;
    for (let swap = 1; swap <= SWAPS; swap++) {
      await writePair(dir, pairs[swap % 2]);
      const started = performance.now();
      server.kill("SIGHUP");
      const done = await until(
        async () => await reloads(metricsPort, "reloaded") === swap,
        5000,
      );
      times.push(performance.now() - started);
      if (!done || await servedPair(port, pairs) !== swap % 2) wrong++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // A key that is not the certificate's: refused, the serving pair kept.
    const serving = SWAPS % 2;
    await writePair(dir, { cert: pairs[1 - serving].cert, key: pairs[serving].key });
    server.kill("SIGHUP");
    const refused = await until(async () => await reloads(metricsPort, "refused") === 1, 5000);
    const kept = await servedPair(port, pairs) === serving &&
      await reloads(metricsPort, "reloaded") === SWAPS;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    wrk.kill("SIGINT");
    const output = await wrk.output();
    const text = new TextDecoder().decode(output.stdout);
    const requests = /(\d+) requests in/.exec(text)?.[1];
    const errors = /Socket errors: (.*)/.exec(text)?.[1] ?? "none";
    const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? "0";
    times.sort((a, b) => a - b);
    const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
    console.log(
      `--workers ${workers}: ${SWAPS} swaps by SIGHUP under wrk -c50: ${requests} requests, ` +
        `socket errors: ${errors}, non-2xx: ${non2xx}; reload p50 ${at(0.5).toFixed(0)} ms, ` +
        `max ${at(1).toFixed(0)} ms; new connections on the old certificate after a reload: ` +
        `${wrong}; mismatched pair refused: ${refused}, old pair kept: ${kept}`,
    );
  } finally {
    server.kill("SIGTERM");
    await server.status;
    await Deno.remove(dir, { recursive: true });
  }
}

for (const workers of args.values.workers.split(",").map(Number)) await run(workers);
