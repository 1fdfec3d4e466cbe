/**
 * What a second write costs an answer through `Deno.serve`, apart from its bytes: a bare server
 * over HTTPS (TCP_NODELAY, as keygate listens) answering keygate's 184-byte XML body with a head
 * padded by one field, pinned to core 0 and loaded by wrk on core 1, at three paddings in
 * alternating rounds: none (one write), one that puts head and body just past 512 bytes (Deno
 * 2.9's HTTP/1.1 writer then writes the body apart: two writes), and 200 bytes more, which takes
 * the head itself past 512 (its buffer then grows to 1,024 and the answer is one write again, with
 * more bytes than the two-write one). Prints each padding's head length and the server's CPU per
 * request by round (user and system, from /proc), and its median. See docs/performance.md, "Where
 * the 10.7 µs went". A diagnostic between `deno task bench` runs, not a target.
 *
 * Usage: deno run -A scripts/bench/write_split.ts [ROUNDS [SECONDS]]
 *
 * @module
 */
import { findFreePort } from "../../tests/_helpers/free_port.ts";
import { generateSelfSigned } from "../../src/platform/tls.ts";
import { readProcessCpuSeconds } from "./proc.ts";
import { runWrk } from "./wrk.ts";

const ROUNDS = Number(Deno.args[0] ?? 3);
const SECONDS = Number(Deno.args[1] ?? 4);
/** Paddings (bytes of one field's value): one write, two writes, one write with more bytes. */
const PADDINGS = [0, 150, 350];

/** The child: serves the padded answer on `port` until killed. */
async function serveChild(pad: number, port: number): Promise<void> {
  const { setListenerNoDelay } = await import("../../src/platform/nodelay.ts");
  const [cert, key] = [Deno.env.get("WRITE_SPLIT_CERT")!, Deno.env.get("WRITE_SPLIT_KEY")!];
  const body = `<?xml version="1.0" encoding="UTF-8"?><x>${"a".repeat(137)}</x>`;
  Deno.serve({
    hostname: "127.0.0.1",
    port,
    cert,
    key,
    onListen({ port }) {
      if (setListenerNoDelay(port) === 0) throw new Error("Cannot set TCP_NODELAY");
    },
  }, () => {
    const headers = new Headers({ "content-type": "application/xml; charset=utf-8" });
    headers.set("cache-control", "no-store");
    headers.set("x-content-type-options", "nosniff");
    if (pad > 0) headers.set("x-pad", "p".repeat(pad));
    return new Response(body, { headers });
  });
  await new Promise(() => {});
}

if (Deno.env.get("WRITE_SPLIT_CHILD") !== undefined) {
  await serveChild(Number(Deno.args[0]), Number(Deno.args[1]));
}

const { cert, key } = await generateSelfSigned();
const work = Deno.makeTempDirSync({ prefix: "keygate-write-split-" });
const cpu: Record<number, number[]> = {};
const heads: Record<number, number> = {};
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const pad of PADDINGS) {
      const port = findFreePort();
      const child = new Deno.Command("taskset", {
        args: ["-c", "0", Deno.execPath(), "run", "-A", import.meta.filename!, `${pad}`, `${port}`],
        env: { WRITE_SPLIT_CHILD: "1", WRITE_SPLIT_CERT: cert, WRITE_SPLIT_KEY: key },
        stdout: "null",
        stderr: "inherit",
      }).spawn();
      try {
        const url = `https://127.0.0.1:${port}/`;
        const client = Deno.createHttpClient({ caCerts: [cert] });
        for (let tries = 0;; tries++) {
          try {
            const response = await fetch(url, { client });
            await response.arrayBuffer();
            // The head as sent: status line, the fields, date and content-length.
            heads[pad] = [...response.headers].reduce((n, [k, v]) =>
              n + k.length + v.length + 4, 0) +
              "HTTP/1.1 200 OK\r\n\r\n".length;
            break;
          } catch (error) {
            if (tries > 50) throw error;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
        client.close();
        const load = { kind: "fixed", url } as const;
        const options = { cores: "1", threads: 1, connections: 50, duration: 2 };
        await runWrk(load, options, work); // warm
        const before = readProcessCpuSeconds(child.pid);
        const run = await runWrk(load, { ...options, duration: SECONDS }, work);
        const used = readProcessCpuSeconds(child.pid) - before;
        (cpu[pad] ??= []).push(used * 1e6 / run.requests);
      } finally {
        child.kill();
        await child.status;
      }
    }
  }
} finally {
  Deno.removeSync(work, { recursive: true });
}
const load = Deno.loadavg().map((n) => n.toFixed(2)).join(" ");
console.log(
  `Server CPU µs per answer, 184-byte body, ${ROUNDS} rounds of ${SECONDS} s (load ${load}):`,
);
for (const pad of PADDINGS) {
  const values = cpu[pad];
  const median = [...values].sort((a, b) => a - b)[values.length >> 1];
  const writes = heads[pad] + 184 <= 512 || heads[pad] > 512 ? "one write" : "two writes";
  console.log(
    `  padding ${pad}: head ${heads[pad]} bytes, ${writes}: median ${median.toFixed(2)} ` +
      `(rounds ${values.map((v) => v.toFixed(1)).join(", ")})`,
  );
}
