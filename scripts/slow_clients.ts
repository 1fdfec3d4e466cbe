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

/** Where the probes connect, and what to close afterwards. */
interface Target {
  hostname: string;
  port: number;
  caCerts?: string[];
  close(): Promise<void>;
}

/** What every probe gets: the target, how long it waits, how slowly it drips. */
interface Probe {
  target: Target;
  waitS: number;
  waitMs: number;
  dripMs: number;
  connections: number;
}

/** keygate's handler on Deno.serve over TLS on loopback, port 0, with a temporary database. */
async function serveLocally(): Promise<Target> {
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
  console.log(`Deno ${Deno.version.deno}, Deno.serve over TLS on 127.0.0.1:${server.addr.port}`);
  return {
    hostname: "127.0.0.1",
    port: server.addr.port,
    caCerts: [cert],
    async close() {
      await server.shutdown();
      await store.closeStore();
      Deno.removeSync(dir, { recursive: true });
    },
  };
}

/** Whatever listens at `HOST:PORT` (such as a reverse proxy), trusting `ca`; undefined if malformed. */
async function findTarget(text: string, ca: string | undefined): Promise<Target | undefined> {
  const target = /^(.+):(\d+)$/.exec(text);
  if (!target) return undefined;
  const [hostname, port] = [target[1], Number(target[2])];
  const caCerts = ca === undefined ? undefined : [await Deno.readTextFile(ca)];
  console.log(`probing ${hostname}:${port}`);
  return { hostname, port, caCerts, close: () => Promise.resolve() };
}

async function connectTls({ hostname, port, caCerts }: Target): Promise<Deno.TlsConn> {
  const conn = await Deno.connectTls({ hostname, port, caCerts });
  await conn.handshake();
  return conn;
}

async function probeTcpOnly({ target, waitMs, waitS }: Probe): Promise<void> {
  const conn = await Deno.connect({ hostname: target.hostname, port: target.port });
  report("1. TCP connect, no TLS handshake", await secondsUntilClosed(conn, waitMs), waitS);
  conn.close();
}

async function probeTlsOnly({ target, waitMs, waitS }: Probe): Promise<void> {
  const conn = await connectTls(target);
  report("2. TLS handshake, no request", await secondsUntilClosed(conn, waitMs), waitS);
  conn.close();
}

async function probeSlowloris({ target, waitMs, waitS, dripMs }: Probe): Promise<void> {
  const conn = await connectTls(target);
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
}

async function probeMissingBody({ target, waitMs, waitS }: Probe): Promise<void> {
  const conn = await connectTls(target);
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
}

async function probeIdleKeepAlive({ target, waitMs, waitS }: Probe): Promise<void> {
  const conn = await connectTls(target);
  await conn.write(encoder.encode("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  const buffer = new Uint8Array(4096);
  await conn.read(buffer).catch(() => null);
  report("5. keep-alive, idle after a response", await secondsUntilClosed(conn, waitMs), waitS);
  conn.close();
}

async function probeManyIdle({ target, connections }: Probe): Promise<void> {
  const idle: Deno.Conn[] = [];
  for (let i = 0; i < connections; i++) {
    idle.push(await Deno.connect({ hostname: target.hostname, port: target.port }));
  }
  const conn = await connectTls(target);
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
  // Without --target: keygate's handler on Deno.serve, here. With it: whatever listens there,
  // such as a reverse proxy in front of keygate.
  const target = values.target === undefined
    ? await serveLocally()
    : await findTarget(values.target, values.ca);
  if (target === undefined) {
    console.error("slow-clients: --target must be HOST:PORT");
    return 2;
  }
  const probe: Probe = {
    target,
    waitS: Number(values.wait),
    waitMs: Number(values.wait) * 1000,
    dripMs: Number(values.drip) * 1000,
    connections: Number(values.connections),
  };
  try {
    await Promise.all(
      [
        probeTcpOnly,
        probeTlsOnly,
        probeSlowloris,
        probeMissingBody,
        probeIdleKeepAlive,
        probeManyIdle,
      ]
        .map((run) => run(probe)),
    );
  } finally {
    await target.close();
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
