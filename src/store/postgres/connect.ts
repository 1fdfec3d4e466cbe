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

/** Opens (lazily: the first query connects) a pool for `location`. */
export function openPostgresClient(
  location: PostgresLocation,
  options: PostgresClientOptions = {},
): postgres.Sql {
  return postgres({
    host: location.host.replace(/^\[(.*)\]$/, "$1"),
    port: location.port,
    database: location.database,
    username: location.user,
    password: location.password,
    ssl: location.sslmode === "disable"
      ? false
      : location.sslmode === "require"
      ? "require"
      : "verify-full",
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 5,
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
    connection: { application_name: options.applicationName ?? "keygate" },
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
