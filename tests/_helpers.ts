/**
 * Shared test fixtures: a real store on a temporary file, a movable clock,
 * the real handler, and a real TLS server on port 0.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { createHandler, type Handler } from "../src/http/app.ts";
import type { Clock } from "../src/platform/clock.ts";
import type { AppDeps } from "../src/http/context.ts";
import { generateApiKey, hashSecret, toKeyPrefix } from "../src/auth/credentials.ts";
import { createKeyUsageRecorder, type KeyUsageRecorder } from "../src/auth/key_usage.ts";
import { createLogger, type Logger } from "../src/platform/logger.ts";
import { createPasswordHasher } from "../src/passwords/passwords.ts";
import type { Store } from "../src/store/store.ts";
import type { SqliteMaintenance } from "../src/store/sqlite/maintenance.ts";
import {
  openSqliteStore,
  type SqliteStore,
  type SqliteStoreOptions,
} from "../src/store/sqlite/sqlite_store.ts";
import { generateSelfSigned } from "../src/platform/tls.ts";

/** A clock that only moves when told to. */
export interface FakeClock extends Clock {
  advance(ms: number): void;
  set(ms: number): void;
}

export function createFakeClock(start = Date.parse("2026-01-01T00:00:00Z")): FakeClock {
  let now = start;
  return {
    now: () => now,
    advance: (ms) => void (now += ms),
    set: (ms) => void (now = ms),
  };
}

/** A temporary SQLite database file in a directory of its own; see {@link tempDbPath}. */
export interface TempDb {
  path: string;
  dir: string;
  /** Removes the directory and everything in it. */
  cleanup(): void;
  /**
   * Opens a store on the file for `use` (to seed or inspect it around the code under test),
   * and closes it afterwards, even when `use` throws.
   */
  withStore<T>(use: (store: SqliteStore) => Promise<T>): Promise<T>;
  /** `using db = tempDbPath()` removes the directory at the end of the test. */
  [Symbol.dispose](): void;
}

/** Opens a SQLite store on `path` for `use`, and closes it afterwards, even when `use` throws. */
export async function withSqliteStore<T>(
  path: string,
  use: (store: SqliteStore) => Promise<T>,
): Promise<T> {
  const store = openSqliteStore(path);
  try {
    return await use(store);
  } finally {
    await store.closeStore();
  }
}

/** A temporary database path (nothing is created until something opens it). */
export function tempDbPath(): TempDb {
  const dir = Deno.makeTempDirSync({ prefix: "keygate-test-" });
  const path = `${dir}/keygate.sqlite3`;
  const cleanup = () => Deno.removeSync(dir, { recursive: true });
  return {
    path,
    dir,
    cleanup,
    withStore: (use) => withSqliteStore(path, use),
    [Symbol.dispose]: cleanup,
  };
}

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
 * cluster (tests/_postgres.ts). Loaded on demand, so SQLite runs never touch
 * the PostgreSQL client.
 */
async function openPostgresTestStore(): Promise<TestStore> {
  const { sharedPostgres } = await import("./_postgres.ts");
  const { openPostgresStore } = await import("../src/store/postgres/open_postgres_store.ts");
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
    const { openPostgresClient } = await import("../src/store/postgres/connect.ts");
    const { parseStoreUrl } = await import("../src/store/store_url.ts");
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

/** Log lines captured in memory, parsed. */
export function createCapturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: createLogger({ level: "debug", write: (line) => lines.push(line) }), lines };
}

export interface TestApp {
  handler: Handler;
  store: Store;
  /** The SQLite-only operations, when the store is SQLite. */
  sqlite?: SqliteMaintenance;
  clock: FakeClock;
  dbPath: string;
  logLines: string[];
  /** Adds a user and returns its id. */
  addUser(email: string, password: string, timeoutSeconds?: number | null): Promise<number>;
  /** Creates an API key for a user and returns the key. */
  createKey(userId: number): Promise<string>;
  /** The key-usage recorder, when created with `trackKeyUsage`. */
  keyUsage?: KeyUsageRecorder;
  /** Runs one SQL statement on the store's database, as an operator's client would; its rows. */
  querySql(sql: string): Promise<Record<string, unknown>[]>;
  close(): void;
  [Symbol.dispose](): void;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Options of {@link createTestApp}: handler dependencies, and where the store comes from. */
export type TestAppOptions = Partial<AppDeps> & {
  trackKeyUsage?: boolean;
  /** Default: {@link openTestStore}, the backend `KEYGATE_TEST_STORE` names. */
  openStore?: () => Promise<TestStore>;
};

const hasher = createPasswordHasher();

/** The real handler over a real store (SQLite on a temporary file unless `KEYGATE_TEST_STORE` says otherwise). */
export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const { trackKeyUsage, openStore, ...deps } = options;
  const opened = await (openStore ?? openTestStore)();
  const store = opened.store;
  const clock = createFakeClock();
  const { logger, lines } = createCapturingLogger();
  const keyUsage = trackKeyUsage ? createKeyUsageRecorder({ store, clock, logger }) : undefined;
  const handler = createHandler({
    store,
    hasher,
    clock,
    logger,
    defaultTimeoutSeconds: 36000,
    keyUsage,
    ...deps,
  });
  return {
    handler,
    store,
    sqlite: opened.sqlite,
    clock,
    dbPath: opened.path,
    async querySql(sql) {
      const rows = await querySqlAt(opened.path, sql);
      // On PostgreSQL a hand-made change moves no grant epoch: do what docs/postgres.md tells an
      // operator to do after one. SQLite sees every connection's commit and needs nothing.
      if (TEST_STORE_NAME === "postgres" && !/^\s*select\b/i.test(sql)) {
        await querySqlAt(opened.path, "UPDATE grant_epoch SET epoch = epoch + 1 WHERE id = 1");
        await afterExternalWrite(opened.path);
      }
      return rows;
    },
    logLines: lines,
    keyUsage,
    async addUser(email, password, timeoutSeconds = null) {
      const passwordHash = await hasher.hash(password);
      const user = await store.insertUser(
        { email, passwordHash, tokenTimeoutSeconds: timeoutSeconds },
        { now: clock.now(), audit: undefined },
      );
      return user.id;
    },
    createKey: (userId) => addApiKey(store, userId, clock.now()),
    close: () => opened[Symbol.dispose](),
    [Symbol.dispose]: () => opened[Symbol.dispose](),
    [Symbol.asyncDispose]: () => opened[Symbol.asyncDispose](),
  };
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

export const BASE = "https://keygate.test";

/** JSON `auth_request` body. */
export function jsonAuthRequest(email: string, password: string, apiKey?: string): string {
  const request: Record<string, unknown> = { user: { email, password } };
  if (apiKey !== undefined) request.api_key = apiKey;
  return JSON.stringify({ auth_request: request });
}

/** XML `auth_request` body. */
export function xmlAuthRequest(email: string, password: string, apiKey?: string): string {
  const key = apiKey === undefined ? "" : `<api_key>${apiKey}</api_key>`;
  return `<?xml version="1.0" encoding="UTF-8"?><auth_request><user><email>${email}</email>` +
    `<password>${password}</password></user>${key}</auth_request>`;
}

/** POSTs a token request to the handler. */
export function postToken(
  handler: Handler,
  body: string,
  headers: Record<string, string> = { "content-type": "application/json" },
  path = "/api/userservice/tokens",
): Promise<Response> {
  return handler(new Request(BASE + path, { method: "POST", body, headers }));
}

/** Gets a token through the handler (JSON) and returns it. */
export async function issueToken(
  handler: Handler,
  email: string,
  password: string,
  apiKey: string,
): Promise<string> {
  const response = await postToken(handler, jsonAuthRequest(email, password, apiKey), {
    "content-type": "application/json",
    accept: "application/json",
  });
  if (response.status !== 200) throw new Error(`token request failed: ${await response.text()}`);
  return (await response.json()).auth_response.access_token;
}

/** A secure GET through the handler with the token in the query string. */
export function secureGet(
  handler: Handler,
  path: string,
  apiKey: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  const url = new URL(BASE + path);
  url.searchParams.set("api_key", apiKey);
  url.searchParams.set("api_token", token);
  return handler(new Request(url, { headers }));
}

/** Counts the rows of a table, read straight from the store's database. */
export function countRows(store: Store, table: "users" | "api_keys" | "tokens"): Promise<number> {
  return store.countRows(table);
}

let certificate: Promise<{ cert: string; key: string }> | undefined;

/** One self-signed certificate per test run. */
export function testCertificate(): Promise<{ cert: string; key: string }> {
  certificate ??= generateSelfSigned();
  return certificate;
}

export interface TlsServer {
  origin: string;
  client: Deno.HttpClient;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Serves `handler` over real TLS on 127.0.0.1 and a free port. */
export async function startTlsServer(handler: Handler): Promise<TlsServer> {
  const { cert, key } = await testCertificate();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert, key, onListen: () => {} },
    handler,
  );
  const client = Deno.createHttpClient({ caCerts: [cert] });
  const close = async () => {
    client.close();
    await server.shutdown();
  };
  return {
    origin: `https://127.0.0.1:${server.addr.port}`,
    client,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Asserts an `error_response` with this status and code; returns the message (JSON) or body (XML). */
export async function assertError(
  response: Response,
  status: number,
  code: string,
  format: "json" | "xml" = "xml",
) {
  assert.equal(response.status, status);
  assert.equal(response.headers.get("content-type"), `application/${format}; charset=utf-8`);
  const body = await response.text();
  if (format === "json") {
    const error = JSON.parse(body).error_response;
    assert.equal(error.status, String(status));
    assert.equal(error.errors.error[0].error_code, code);
    return error.errors.error[0].error_message as string;
  }
  assert.match(body, new RegExp(`<status>${status}</status>.*<error_code>${code}</error_code>`));
  return body;
}
