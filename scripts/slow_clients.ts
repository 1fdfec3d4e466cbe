/**
 * Measures what `Deno.serve` (over TLS, with keygate's handler) does with
 * slow and idle clients, so that docs/deploy.md can say which limits
 * keygate enforces itself and which a reverse proxy must add:
 *
 * 1. a TCP connection that never starts the TLS handshake;
 * 2. a TLS connection that never sends a request;
 * 3. request headers sent one byte every `--drip` seconds (slowloris);
 * 4. complete headers, then a body that never arrives;
 * 5. a keep-alive connection left idle after a response;
 * 6. many idle connections at once, and whether a new client is still served.
 *
 *     deno task slow-clients [--wait 45] [--drip 1] [--connections 200]
 *     deno task slow-clients --target HOST:PORT [--ca FILE]
 *
 * Each probe reports when the server closed the connection, or that it was
 * still open after `--wait` seconds. Without `--target` it serves keygate's
 * handler itself on loopback, port 0; with it, it probes whatever listens
 * there (such as the reverse proxy in front of keygate), trusting `--ca`.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { createHandler } from "../src/http/app.ts";
import { systemClock } from "../src/platform/clock.ts";
import { silentLogger } from "../src/platform/logger.ts";
import { createPasswordHasher } from "../src/passwords/passwords.ts";
import { openSqliteStore } from "../src/store/sqlite/sqlite_store.ts";
import type { Store } from "../src/store/store.ts";
import { generateSelfSigned } from "../src/platform/tls.ts";

const encoder = new TextEncoder();

/** Resolves with the seconds until the peer closed `conn`, or `undefined` after `waitMs`. */
async function secondsUntilClosed(
  conn: Deno.Conn,
  waitMs: number,
  started = performance.now(),
): Promise<number | undefined> {
  const buffer = new Uint8Array(4096);
  const deadline = started + waitMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), Math.max(0, deadline - performance.now()));
  });
  try {
    while (true) {
      const read = await Promise.race([conn.read(buffer).catch(() => null), timeout]);
      if (read === "timeout") return undefined;
      if (read === null) return (performance.now() - started) / 1000;
    }
  } finally {
    clearTimeout(timer);
  }
}

function report(name: string, seconds: number | undefined, waitS: number, note = ""): void {
  const outcome = seconds === undefined
    ? `still open after ${waitS} s`
    : `closed by the server after ${seconds.toFixed(1)} s`;
  console.log(`${name.padEnd(44)} ${outcome}${note ? ` (${note})` : ""}`);
}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      wait: { type: "string", default: "45" },
      drip: { type: "string", default: "1" },
      connections: { type: "string", default: "200" },
      target: { type: "string" },
      ca: { type: "string" },
    },
  });
  const waitS = Number(values.wait);
  const waitMs = waitS * 1000;
  const dripMs = Number(values.drip) * 1000;
  const connections = Number(values.connections);

  // Without --target: keygate's handler on Deno.serve, here. With it: whatever listens there,
  // such as a reverse proxy in front of keygate.
  let local:
    | { server: Deno.HttpServer; store: Store; dir: string }
    | undefined;
  let hostname: string;
  let port: number;
  let caCerts: string[] | undefined;
  if (values.target === undefined) {
    const dir = Deno.makeTempDirSync({ prefix: "keygate-slow-" });
    const store = openSqliteStore(`${dir}/keygate.sqlite3`);
    const { cert, key } = await generateSelfSigned();
    const handler = createHandler({
      store,
      hasher: createPasswordHasher({ workers: 1 }),
      clock: systemClock,
      logger: silentLogger,
      defaultTimeoutSeconds: 3600,
    });
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, cert, key, onListen: () => {} },
      handler,
    );
    local = { server, store, dir };
    hostname = "127.0.0.1";
    port = server.addr.port;
    caCerts = [cert];
    console.log(`Deno ${Deno.version.deno}, Deno.serve over TLS on 127.0.0.1:${port}`);
  } else {
    const target = /^(.+):(\d+)$/.exec(values.target);
    if (!target) {
      console.error("slow-clients: --target must be HOST:PORT");
      return 2;
    }
    hostname = target[1];
    port = Number(target[2]);
    caCerts = values.ca === undefined ? undefined : [await Deno.readTextFile(values.ca)];
    console.log(`probing ${hostname}:${port}`);
  }
  const tls = async () => {
    const conn = await Deno.connectTls(
      { hostname, port, caCerts },
    );
    await conn.handshake();
    return conn;
  };

  try {
    const probes: Promise<void>[] = [];

    probes.push((async () => {
      const conn = await Deno.connect({ hostname, port });
      report("1. TCP connect, no TLS handshake", await secondsUntilClosed(conn, waitMs), waitS);
      conn.close();
    })());

    probes.push((async () => {
      const conn = await tls();
      report("2. TLS handshake, no request", await secondsUntilClosed(conn, waitMs), waitS);
      conn.close();
    })());

    probes.push((async () => {
      const conn = await tls();
      const request = encoder.encode(
        "POST /api/userservice/tokens HTTP/1.1\r\nHost: localhost\r\n" +
          "X-Padding: " + "a".repeat(10_000) + "\r\n\r\n",
      );
      const started = performance.now();
      let sent = 0;
      const drip = setInterval(() => {
        if (sent < request.length) conn.write(request.subarray(sent, ++sent)).catch(() => {});
      }, dripMs);
      const closed = await secondsUntilClosed(conn, waitMs, started);
      clearInterval(drip);
      report("3. headers one byte per drip (slowloris)", closed, waitS, `${sent} bytes sent`);
      conn.close();
    })());

    probes.push((async () => {
      const conn = await tls();
      await conn.write(encoder.encode(
        "POST /api/userservice/tokens HTTP/1.1\r\nHost: localhost\r\n" +
          "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
      ));
      const started = performance.now();
      const buffer = new Uint8Array(4096);
      const first = await Promise.race([
        conn.read(buffer).then(
          (n) => n === null ? "" : new TextDecoder().decode(buffer.subarray(0, n)),
          () => "", // reset by the server
        ),
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), waitMs)),
      ]);
      const status = first?.split("\r\n")[0];
      const answeredAfter = (performance.now() - started) / 1000;
      const closed = await secondsUntilClosed(conn, waitMs, started);
      report(
        "4. headers, then a body that never comes",
        closed,
        waitS,
        status ? `"${status}" after ${answeredAfter.toFixed(1)} s` : "no response",
      );
      conn.close();
    })());

    probes.push((async () => {
      const conn = await tls();
      await conn.write(encoder.encode("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"));
      const buffer = new Uint8Array(4096);
      await conn.read(buffer).catch(() => null);
      report("5. keep-alive, idle after a response", await secondsUntilClosed(conn, waitMs), waitS);
      conn.close();
    })());

    probes.push((async () => {
      const idle: Deno.Conn[] = [];
      for (let i = 0; i < connections; i++) {
        idle.push(await Deno.connect({ hostname, port }));
      }
      const conn = await tls();
      const started = performance.now();
      await conn.write(
        encoder.encode("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
      );
      const buffer = new Uint8Array(4096);
      const n = await conn.read(buffer);
      const status = n === null
        ? "no answer"
        : new TextDecoder().decode(buffer.subarray(0, n)).split("\r\n")[0];
      console.log(
        `6. ${connections} idle TCP connections open`.padEnd(45) +
          `a new client got "${status}" in ${(performance.now() - started).toFixed(0)} ms`,
      );
      conn.close();
      for (const conn of idle) conn.close();
    })());

    await Promise.all(probes);
  } finally {
    if (local) {
      await local.server.shutdown();
      await local.store.closeStore();
      Deno.removeSync(local.dir, { recursive: true });
    }
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
