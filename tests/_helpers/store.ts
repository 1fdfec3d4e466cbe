/**
 * A fresh store for one test, on the backend `KEYGATE_TEST_STORE` names (SQLite on a
 * temporary file by default, or a database of a throwaway PostgreSQL cluster), and the
 * few writes and reads tests use to seed and inspect it without going through the API.
 */
import { DatabaseSync } from "node:sqlite";
import { generateApiKey, hashSecret, toKeyPrefix } from "../../src/auth/credentials.ts";
import type { Store } from "../../src/store/store.ts";
import type { SqliteMaintenance } from "../../src/store/sqlite/maintenance.ts";
import { openSqliteStore, type SqliteStoreOptions } from "../../src/store/sqlite/sqlite_store.ts";
import { tempDbPath } from "./temp_db.ts";

/** A store for one test; `using` (or `await using`) closes it and removes its files. */
export interface TestStore {
  store: Store;
  /** The SQLite-only operations, when the store is SQLite. */
  sqlite?: SqliteMaintenance;
  /** The SQLite database file, when the store is SQLite on a file. */
  path: string;
  dir: string;
  close(): Promise<void>;
  [Symbol.dispose](): void;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Opens a fresh, empty store for one test. */
export type TestStoreFactory = (options?: { sqlite?: SqliteStoreOptions }) => Promise<TestStore>;

/** A SQLite store on a new temporary file. */
export function openTempStore(
  options?: SqliteStoreOptions,
): TestStore & { sqlite: SqliteMaintenance } {
  const db = tempDbPath();
  const store = openSqliteStore(db.path, options);
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    void store.closeStore(); // SQLite closes synchronously
    db.cleanup();
  };
  return {
    store,
    sqlite: store.sqlite,
    path: db.path,
    dir: db.dir,
    close: () => Promise.resolve(close()),
    [Symbol.dispose]: close,
    [Symbol.asyncDispose]: () => Promise.resolve(close()),
  };
}

/**
 * The store factories end-to-end tests can run on, by name. Another backend
 * registers its factory here, and `KEYGATE_TEST_STORE=<name> deno task test`
 * runs the HTTP suite against it.
 */
export const TEST_STORE_FACTORIES: Record<string, TestStoreFactory> = {
  sqlite: (options) => Promise.resolve(openTempStore(options?.sqlite)),
  postgres: openPostgresTestStore,
};

/** The PostgreSQL test stores open now, by URL (see {@link afterExternalWrite}). */
const OPEN_POSTGRES_STORES = new Map<string, { refreshGrantEpoch(): Promise<void> }>();

/**
 * Call after another process (the admin CLI) wrote to the database at
 * `location`: a PostgreSQL test store there re-reads the grant epoch now, as
 * it would on the notification a few milliseconds later. SQLite sees other
 * connections' commits at once and needs nothing.
 */
export async function afterExternalWrite(location: string): Promise<void> {
  await OPEN_POSTGRES_STORES.get(location)?.refreshGrantEpoch();
}

/**
 * A PostgreSQL store on a new database of this test process's throwaway
 * cluster (tests/_helpers/postgres_cluster.ts). Loaded on demand, so SQLite runs never touch
 * the PostgreSQL client.
 */
async function openPostgresTestStore(): Promise<TestStore> {
  const { sharedPostgres } = await import("./postgres_cluster.ts");
  const { openPostgresStore } = await import("../../src/store/postgres/open_postgres_store.ts");
  const cluster = await sharedPostgres();
  const url = await cluster.createDatabase("e2e");
  const store = await openPostgresStore(url);
  OPEN_POSTGRES_STORES.set(url, store);
  let closing: Promise<void> | undefined;
  const close = () => {
    OPEN_POSTGRES_STORES.delete(url);
    return closing ??= store.closeStore();
  };
  return {
    store,
    path: url,
    dir: "",
    close,
    // A synchronous `using` cannot wait: the store closes in the background.
    [Symbol.dispose]: () => void close(),
    [Symbol.asyncDispose]: close,
  };
}

/** The factory `KEYGATE_TEST_STORE` names (default `sqlite`). */
export function findTestStoreFactory(): TestStoreFactory {
  const name = Deno.env.get("KEYGATE_TEST_STORE") ?? "sqlite";
  const factory = TEST_STORE_FACTORIES[name];
  if (factory === undefined) {
    throw new Error(
      `Unknown KEYGATE_TEST_STORE "${name}": expected one of ${
        Object.keys(TEST_STORE_FACTORIES).join(", ")
      }`,
    );
  }
  return factory;
}

/** A fresh store of the backend the tests run against (see {@link findTestStoreFactory}). */
export function openTestStore(options?: { sqlite?: SqliteStoreOptions }): Promise<TestStore> {
  return findTestStoreFactory()(options);
}

/** The backend the HTTP suite runs on (`KEYGATE_TEST_STORE`, default `sqlite`). */
export const TEST_STORE_NAME = Deno.env.get("KEYGATE_TEST_STORE") ?? "sqlite";

/**
 * Runs one SQL statement on the database at a store location (a SQLite file
 * or a `postgres://` URL) over a connection of its own; resolves to its rows.
 */
export async function querySqlAt(
  location: string,
  sql: string,
): Promise<Record<string, unknown>[]> {
  if (/^postgres(ql)?:\/\//.test(location)) {
    const { openPostgresClient } = await import("../../src/store/postgres/connect.ts");
    const { parseStoreUrl } = await import("../../src/store/store_url.ts");
    const parsed = parseStoreUrl(location);
    if (parsed.kind !== "postgres") throw new Error("unreachable");
    const client = openPostgresClient(parsed, { max: 1 });
    try {
      return [...await client.unsafe(sql)];
    } finally {
      await client.end();
    }
  }
  const db = new DatabaseSync(location);
  try {
    return db.prepare(sql).all() as Record<string, unknown>[];
  } finally {
    db.close();
  }
}

/** Adds a user with this password hash (no audit row); resolves to the user's id. */
export async function addTestUser(
  store: Store,
  email: string,
  options: { passwordHash?: string; now?: number; tokenTimeoutSeconds?: number | null } = {},
): Promise<number> {
  const user = await store.insertUser({
    email,
    passwordHash: options.passwordHash ?? "x",
    tokenTimeoutSeconds: options.tokenTimeoutSeconds ?? null,
  }, { now: options.now ?? 0, audit: undefined });
  return user.id;
}

/** Creates an API key for a user (no audit row); resolves to the key. */
export async function addApiKey(
  store: Store,
  userId: number,
  now: number,
  options: { expiresAt?: number | null; introspect?: boolean; label?: string } = {},
): Promise<string> {
  const apiKey = generateApiKey();
  await store.insertApiKey({
    userId,
    keyHash: hashSecret(apiKey),
    prefix: toKeyPrefix(apiKey),
    label: options.label ?? "",
    expiresAt: options.expiresAt,
    introspect: options.introspect,
  }, { now, audit: undefined });
  return apiKey;
}

/** Inserts a token row for a user's key (no audit row), `secret`'s digest; resolves to its id. */
export function addTestToken(
  store: Store,
  token: { userId: number; apiKeyId: number; issuedAt: number; expiresAt: number; secret?: string },
): Promise<number> {
  return store.insertToken({
    tokenHash: hashSecret(token.secret ?? "t".repeat(40)),
    userId: token.userId,
    apiKeyId: token.apiKeyId,
    issuedAt: token.issuedAt,
    expiresAt: token.expiresAt,
    maxLiveTokens: 100,
  }, { audit: undefined });
}

/** Counts the rows of a table, read straight from the store's database. */
export function countRows(store: Store, table: "users" | "api_keys" | "tokens"): Promise<number> {
  return store.countRows(table);
}
