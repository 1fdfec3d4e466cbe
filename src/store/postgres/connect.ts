/**
 * Opens a pool of connections (npm `postgres`, porsager's client) from a
 * parsed `--store` URL.
 *
 * `bigint` columns (times in milliseconds, ids, counts) come back as
 * JavaScript numbers: every value keygate stores is far below 2^53. `bytea`
 * comes back as a `Uint8Array` (a Node Buffer). Server notices are dropped:
 * they are not errors, and `CREATE ... IF NOT EXISTS` emits them.
 *
 * @module
 */
import postgres from "postgres";
import type { PostgresLocation } from "../store_url.ts";
import { createPrimarySocket } from "./primary_socket.ts";

/** Options for {@link openPostgresClient}. */
export interface PostgresClientOptions {
  /** Connections in the pool. Default 10. */
  max?: number;
  /** Shown in `pg_stat_activity`. Default `"keygate"`. */
  applicationName?: string;
  /** Seconds to wait for a connection. Default 5. */
  connectTimeoutSeconds?: number;
  /** Called with each notification (for the grant-epoch listener's own client). */
  onnotify?: (channel: string, payload: string) => void;
  /** Called when a connection closes (for the grant-epoch listener's own client). */
  onclose?: () => void;
  /**
   * Recycle connections after about this long (postgres.js's default: 30 to 60 minutes), or
   * `null` never: the listener keeps its one connection, since each reconnect drops the cache.
   */
  maxLifetimeSeconds?: number | null;
}

/** PostgreSQL's `int8` type id. */
const INT8 = 20;

/**
 * Seconds before a closed connection is opened again, after `failures` failed connections in a
 * row. postgres.js's default grows to 10–20 s during an outage, which would hold a connection
 * (the listener's, say) away from a database that came back or was failed over for that long:
 * capped at a quarter of a second, so that keygate serves again at once.
 */
export function reconnectDelaySeconds(failures: number): number {
  return Math.min(0.25, 0.01 * 2 ** failures);
}

/** Opens (lazily: the first query connects) a pool for `location`. */
export function openPostgresClient(
  location: PostgresLocation,
  options: PostgresClientOptions = {},
): postgres.Sql {
  const ssl = location.sslmode === "disable"
    ? false
    : location.sslmode === "require"
    ? "require"
    : "verify-full";
  const connectTimeoutSeconds = options.connectTimeoutSeconds ?? 5;
  const applicationName = options.applicationName ?? "keygate";
  // Several hosts, or a target_session_attrs: keygate picks the server (see primary_socket.ts);
  // the pool itself checks that the one it was given is no standby.
  const choosing = location.hosts !== undefined || location.targetSessionAttrs !== undefined;
  return postgres({
    host: location.host.replace(/^\[(.*)\]$/, "$1"),
    port: location.port,
    database: location.database,
    username: location.user,
    password: location.password,
    ssl,
    ...(choosing
      ? {
        socket: createPrimarySocket(location, {
          timeoutSeconds: connectTimeoutSeconds,
          ssl,
          applicationName,
        }),
        target_session_attrs: "primary",
      }
      : {}),
    backoff: reconnectDelaySeconds,
    max: options.max ?? 10,
    connect_timeout: connectTimeoutSeconds,
    // Connections are long-lived; let them be recycled now and then like the default, but
    // never close idle ones: a secure request should not pay a connection set-up.
    idle_timeout: 0,
    ...(options.maxLifetimeSeconds === undefined
      ? {}
      : { max_lifetime: options.maxLifetimeSeconds }),
    prepare: true,
    // No array types fetched on connect: keygate sends no arrays, and postgres.js 3.4.9 leaves
    // that fetch's promise unhandled when the connection drops during it (a crash, not an error).
    fetch_types: false,
    onnotice: () => {},
    ...(options.onnotify === undefined ? {} : { onnotify: options.onnotify }),
    ...(options.onclose === undefined ? {} : { onclose: options.onclose }),
    connection: { application_name: applicationName },
    types: {
      bigint: {
        to: INT8,
        from: [INT8],
        serialize: (value: number | bigint) => String(value),
        parse: (value: string) => Number(value),
      },
    },
  });
}
