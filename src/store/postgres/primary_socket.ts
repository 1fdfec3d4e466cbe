/**
 * Connects to the writable primary among the servers of a multi-host `--store` URL
 * (`target_session_attrs=read-write` or `primary`), for every connection a pool opens: the
 * pooled ones, the listener's, and after a failover each of their reconnections.
 *
 * postgres.js 3.4.9 takes several hosts itself, but its failover cannot be used as it is
 * (porsager/postgres#1174, #988): with two hosts or more it never runs out of hosts, so while
 * no host qualifies (the primary down, the standby not yet promoted) a query neither runs nor
 * fails, and it retries without a pause; and its `read-write` check reads only
 * `default_transaction_read_only`, which a PostgreSQL 14+ standby reports as `off`. So the pool
 * is given one host and a `socket` function: before each connection, {@link findServer} asks
 * every listed server at once, on a short-lived connection of its own, whether it is in
 * recovery (and, for `read-write`, whether it is read-only by default), and the pool connects
 * to the first that qualifies (the answer is reused for a second, unless connecting to that
 * server fails). The pool's own `target_session_attrs=primary` check then refuses a server that
 * was demoted meanwhile. When none qualifies, the connection fails at once with
 * {@link NO_PRIMARY}, which the store reports as unavailable (503): a request never waits for a
 * failover to end.
 *
 * @module
 */
import net from "node:net";
import { Duplex } from "node:stream";
import postgres from "postgres";
import type { PostgresHost, PostgresLocation, TargetSessionAttrs } from "../store_url.ts";

/** The error code of a connection that found no server to use. */
export const NO_PRIMARY = "KEYGATE_NO_PRIMARY";

/** How long a server found is used for new connections without asking again. */
const FOUND_FOR_MS = 1000;

/** What a server said about itself. */
interface ServerState {
  inRecovery: boolean;
  readOnly: boolean;
}

/** Asks one server whether it is in recovery and read-only; rejects when it cannot. */
export type AskServer = (server: PostgresHost) => Promise<ServerState>;

/** Options for {@link createPrimarySocket}. */
export interface PrimarySocketOptions {
  /** Seconds to wait for each server's answer. */
  timeoutSeconds: number;
  /** The pool's TLS setting, used for the questions too. */
  ssl: false | "require" | "verify-full";
  applicationName: string;
  /** Replaces the question (tests). */
  ask?: AskServer;
}

/** Whether a server's state suits `wanted`. */
export function isWanted(state: ServerState, wanted: TargetSessionAttrs): boolean {
  return !state.inRecovery && (wanted === "primary" || !state.readOnly);
}

/**
 * The index of the first server of `servers`, in the order their answers arrive, that suits
 * `wanted`, or `undefined` when none does (each unreachable, failing or unsuitable).
 */
export function findServer(
  servers: readonly PostgresHost[],
  wanted: TargetSessionAttrs,
  ask: AskServer,
): Promise<number | undefined> {
  return new Promise((resolve) => {
    let pending = servers.length;
    if (pending === 0) resolve(undefined);
    servers.forEach((server, index) => {
      ask(server).then(
        (state) => {
          if (isWanted(state, wanted)) resolve(index);
        },
        () => {},
      ).finally(() => {
        if (--pending === 0) resolve(undefined);
      });
    });
  });
}

/**
 * The `socket` option of a pool for `location`: a function that resolves to a TCP socket
 * connecting to the server to use (see the module documentation).
 */
export function createPrimarySocket(
  location: PostgresLocation,
  options: PrimarySocketOptions,
): () => Promise<net.Socket | Duplex> {
  const servers = location.hosts ?? [{ host: location.host, port: location.port }];
  const wanted = location.targetSessionAttrs ?? "read-write";
  const ask = options.ask ?? ((server) => askServer(location, server, options));
  let found: { index: number; at: number } | undefined;
  let finding: Promise<number | undefined> | undefined;

  async function choose(): Promise<number | undefined> {
    if (found !== undefined && performance.now() - found.at < FOUND_FOR_MS) return found.index;
    // Connections opening together (a pool after a failover) share one round of questions.
    finding ??= findServer(servers, wanted, ask).finally(() => (finding = undefined));
    const index = await finding;
    found = index === undefined ? undefined : { index, at: performance.now() };
    return index;
  }

  return async () => {
    const index = await choose();
    if (index === undefined) return createFailingSocket();
    const server = servers[index];
    const host = unbracket(server.host);
    const socket = new net.Socket();
    // postgres.js names the TLS server after `socket.host` (for verify-full).
    Object.assign(socket, { host, port: server.port });
    // A server that refuses the connection is asked about again by the next connection.
    socket.once("error", () => {
      if (found?.index === index) found = undefined;
    });
    socket.connect(server.port, host);
    return socket;
  };
}

/**
 * A stream whose first write fails with {@link NO_PRIMARY}: postgres.js writes its start-up
 * message on it, hears the error, rejects the waiting query and returns the connection to its
 * pool, as for a refused connection.
 */
function createFailingSocket(): Duplex {
  const error = Object.assign(new Error("No server of the store URL is a writable primary"), {
    code: NO_PRIMARY,
  });
  return new Duplex({
    read() {},
    write(_chunk, _encoding, callback) {
      callback(error);
    },
  });
}

async function askServer(
  location: PostgresLocation,
  server: PostgresHost,
  options: PrimarySocketOptions,
): Promise<ServerState> {
  const sql = postgres({
    host: unbracket(server.host),
    port: server.port,
    database: location.database,
    username: location.user,
    password: location.password,
    ssl: options.ssl,
    max: 1,
    connect_timeout: options.timeoutSeconds,
    idle_timeout: 0,
    max_lifetime: null,
    prepare: false,
    fetch_types: false,
    onnotice: () => {},
    connection: { application_name: `${options.applicationName}-probe` },
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const answer = sql<{ in_recovery: boolean; read_only: string }[]>`
      SELECT pg_is_in_recovery() AS in_recovery,
        current_setting('transaction_read_only') AS read_only`;
    // A server that accepts the connection but does not answer is no better than a dead one.
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error("The server did not answer")),
        options.timeoutSeconds * 1000,
      );
    });
    answer.catch(() => {});
    const [row] = await Promise.race([answer, late]);
    return { inRecovery: row?.in_recovery === true, readOnly: row?.read_only === "on" };
  } finally {
    clearTimeout(timer);
    await sql.end({ timeout: 0 });
  }
}

function unbracket(host: string): string {
  return host.replace(/^\[(.*)\]$/, "$1");
}
