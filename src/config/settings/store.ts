/**
 * Settings of the store: which database, PostgreSQL's revocation channel, the grant caches in front of it, and how long rows are kept.
 * Each row is placed in the `--help` order by `SETTINGS` in ../settings.ts.
 *
 * @module
 */
import { type Setting, setting } from "../setting.ts";
import {
  parseAuditRetention,
  parseBoolean,
  parseCacheSize,
  parseDatabasePath,
  parseDurationSetting,
  parseStalenessSetting,
  parseStoreSetting,
} from "../parsers.ts";

/** The store settings. */
export const STORE_SETTINGS: readonly Setting[] = [
  setting({
    key: "dbPath",
    flag: "db",
    env: "KEYGATE_DB",
    default: "db/keygate.sqlite3",
    parse: parseDatabasePath,
    placeholder: "PATH",
    description: "SQLite database file, created with its directory if missing",
  }),
  setting({
    key: "store",
    flag: "store",
    env: "KEYGATE_STORE",
    parse: parseStoreSetting,
    placeholder: "URL",
    description:
      "Store instead of --db: postgres://USER[:PASSWORD]@HOST[:PORT][,HOST2…]/DB[?sslmode=…] " +
      "(docs/postgres.md), sqlite:PATH or a path",
  }),
  setting({
    key: "storeStalenessSeconds",
    flag: "store-staleness",
    env: "KEYGATE_STORE_STALENESS",
    default: "2s",
    parse: parseStalenessSetting,
    placeholder: "DURATION",
    description: "PostgreSQL: secure requests get 503 once revocations are unconfirmed this " +
      "long (at most 5m)",
  }),
  setting({
    key: "storeListen",
    flag: "store-listen",
    env: "KEYGATE_STORE_LISTEN",
    default: "on",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "PostgreSQL: LISTEN for revocations (off: poll every 500 ms only, " +
      "where LISTEN cannot be used)",
  }),
  setting({
    key: "grantCacheSize",
    flag: "grant-cache-size",
    env: "KEYGATE_GRANT_CACHE_SIZE",
    default: "100000",
    parse: parseCacheSize,
    placeholder: "N",
    description:
      "Validated grants kept in memory per cache; 0: none, every request reads the store",
  }),
  setting({
    key: "tokenRetentionSeconds",
    flag: "token-retention",
    env: "KEYGATE_TOKEN_RETENTION",
    default: "7d",
    parse: parseDurationSetting,
    placeholder: "DURATION",
    description: "How long expired and revoked token rows are kept before deletion",
  }),
  setting({
    key: "auditRetentionSeconds",
    flag: "audit-retention",
    env: "KEYGATE_AUDIT_RETENTION",
    default: "off",
    parse: parseAuditRetention,
    placeholder: "DURATION",
    description: "How long audit log rows are kept: off (forever) or at least 30d",
  }),
];
