/**
 * Shared test fixtures: a real store on a temporary file, a movable clock,
 * the real handler, and a real TLS server on port 0.
 */
import assert from "node:assert/strict";
import { createHandler, type Handler } from "../src/http/app.ts";
import type { Clock } from "../src/platform/clock.ts";
import type { AppDeps } from "../src/http/context.ts";
import { generateApiKey, hashSecret, toKeyPrefix } from "../src/auth/credentials.ts";
import { createKeyUsageRecorder, type KeyUsageRecorder } from "../src/auth/key_usage.ts";
import { createLogger, type Logger } from "../src/platform/logger.ts";
import { createPasswordHasher } from "../src/passwords/passwords.ts";
import { openStore, type Store, type StoreOptions } from "../src/store/sqlite/store.ts";
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

/** A temporary database path, removed with its directory by `cleanup`. */
export function tempDbPath(): { path: string; dir: string; cleanup(): void } {
  const dir = Deno.makeTempDirSync({ prefix: "keygate-test-" });
  return {
    path: `${dir}/keygate.sqlite3`,
    dir,
    cleanup: () => Deno.removeSync(dir, { recursive: true }),
  };
}

/** A store on a new temporary database; `using` closes it and removes the directory. */
export function openTempStore(
  options?: StoreOptions,
): { store: Store; path: string; dir: string; [Symbol.dispose](): void } {
  const db = tempDbPath();
  const store = openStore(db.path, options);
  return {
    store,
    path: db.path,
    dir: db.dir,
    [Symbol.dispose]() {
      store.close();
      db.cleanup();
    },
  };
}

/** Log lines captured in memory, parsed. */
export function createCapturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: createLogger({ level: "debug", write: (line) => lines.push(line) }), lines };
}

export interface TestApp {
  handler: Handler;
  store: Store;
  clock: FakeClock;
  dbPath: string;
  logLines: string[];
  /** Adds a user and returns its id. */
  addUser(email: string, password: string, timeoutSeconds?: number | null): Promise<number>;
  /** Creates an API key for a user and returns the key. */
  createKey(userId: number): string;
  /** The key-usage recorder, when created with `trackKeyUsage`. */
  keyUsage?: KeyUsageRecorder;
  close(): void;
  [Symbol.dispose](): void;
}

const hasher = createPasswordHasher();

/** The real handler over a real store on a temporary file. */
export function createTestApp(
  options: Partial<AppDeps> & { trackKeyUsage?: boolean } = {},
): TestApp {
  const db = tempDbPath();
  const store = openStore(db.path);
  const clock = createFakeClock();
  const { logger, lines } = createCapturingLogger();
  const { trackKeyUsage, ...deps } = options;
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
  const close = () => {
    store.close();
    db.cleanup();
  };
  return {
    handler,
    store,
    clock,
    dbPath: db.path,
    logLines: lines,
    keyUsage,
    async addUser(email, password, timeoutSeconds = null) {
      const passwordHash = await hasher.hash(password);
      return store.insertUser(
        { email, passwordHash, tokenTimeoutSeconds: timeoutSeconds },
        clock.now(),
      ).id;
    },
    createKey(userId) {
      const apiKey = generateApiKey();
      store.insertApiKey(
        { userId, keyHash: hashSecret(apiKey), prefix: toKeyPrefix(apiKey), label: "" },
        clock.now(),
      );
      return apiKey;
    },
    close,
    [Symbol.dispose]: close,
  };
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
export function countRows(store: Store, table: "users" | "api_keys" | "tokens"): number {
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
