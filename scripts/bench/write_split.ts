/**
 * What a second write costs an answer through `Deno.serve`, apart from its bytes: the bare server
 * answering as keygate answers a secure GET (`bare_server.ts --keygate-shape`: HTTPS, TCP_NODELAY,
 * keygate's fields and body size) with its head padded by one more field, pinned to core 0 and
 * loaded by wrk on core 1, at three paddings in alternating rounds: none (one write), one that puts
 * head and body just past 512 bytes (Deno 2.9's HTTP/1.1 writer then writes the body apart: two
 * writes), and 200 bytes more, which takes the head itself past 512 (its buffer then grows to
 * 1,024 and the answer is one write again, with more bytes than the two-write one). Prints each
 * padding's head and body length and the server's CPU per request by round (user and system, from
 * /proc), and its median. See docs/performance.md, "Where the 10.7 µs went". A diagnostic between
 * `deno task bench` runs, not a target.
 *
 * Usage: deno run -A scripts/bench/write_split.ts [ROUNDS [SECONDS]]
 *
 * @module
 */
import { generateSelfSigned } from "../../src/platform/tls.ts";
import { pinTo, startServer } from "./servers.ts";
import { runWrk } from "./wrk.ts";

const ROUNDS = Number(Deno.args[0] ?? 3);
const SECONDS = Number(Deno.args[1] ?? 4);
/** Paddings (bytes of one field's value): one write, two writes, one write with more bytes. */
const PADDINGS = [0, 150, 350];
const BARE = new URL("./bare_server.ts", import.meta.url).pathname;

const { cert, key } = await generateSelfSigned();
const work = Deno.makeTempDirSync({ prefix: "keygate-write-split-" });
Deno.writeTextFileSync(`${work}/cert.pem`, cert);
Deno.writeTextFileSync(`${work}/key.pem`, key);
const cpu: Record<number, number[]> = {};
const sizes: Record<number, { head: number; body: number }> = {};
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const pad of PADDINGS) {
      const argv = [Deno.execPath(), "run", "--allow-net", "--allow-read", "--allow-ffi", BARE];
      const server = await startServer(
        work,
        `bare-pad-${pad}`,
        pinTo("0", [
          ...argv,
          "--keygate-shape",
          "--pad",
          `${pad}`,
          `${work}/cert.pem`,
          `${work}/key.pem`,
        ]),
        /listening (\d+)/,
      );
      try {
        const url = `${server.origin}/`;
        const client = Deno.createHttpClient({ caCerts: [cert] });
        const response = await fetch(url, { client });
        const body = (await response.arrayBuffer()).byteLength;
        client.close();
        // The head as sent: status line, the fields (date and content-length among them).
        const head = [...response.headers].reduce((n, [k, v]) => n + k.length + v.length + 4, 0) +
          "HTTP/1.1 200 OK\r\n\r\n".length;
        sizes[pad] = { head, body };
        const load = { kind: "fixed", url } as const;
        const options = { cores: "1", threads: 1, connections: 50, duration: 2 };
        await runWrk(load, options, work); // warm
        const before = server.readCpuSeconds();
        const run = await runWrk(load, { ...options, duration: SECONDS }, work);
        (cpu[pad] ??= []).push((server.readCpuSeconds() - before) * 1e6 / run.requests);
      } finally {
        await server.stop();
      }
    }
  }
} finally {
  Deno.removeSync(work, { recursive: true });
}
const load = Deno.loadavg().map((n) => n.toFixed(2)).join(" ");
console.log(`Server CPU µs per answer, ${ROUNDS} rounds of ${SECONDS} s (load ${load}):`);
for (const pad of PADDINGS) {
  const values = cpu[pad];
  const median = [...values].sort((a, b) => a - b)[values.length >> 1];
  const { head, body } = sizes[pad];
  const writes = head + body <= 512 || head > 512 ? "one write" : "two writes";
  console.log(
    `  padding ${pad}: head ${head} bytes, body ${body}, ${writes}: median ${median.toFixed(2)} ` +
      `(rounds ${values.map((v) => v.toFixed(1)).join(", ")})`,
  );
}
