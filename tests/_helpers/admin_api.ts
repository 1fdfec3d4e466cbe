/**
 * Admin API fixtures: the real admin handler and the real API handler over
 * one real store, two operators (write and read), and `call()`, which checks
 * every answer against the OpenAPI document (src/http/admin/openapi.ts):
 * JSON content type, a documented status for that operation, and a body
 * that its schema accepts.
 */
import assert from "node:assert/strict";
import { Ajv2020 } from "ajv/dist/2020.js";
import ajvFormats from "ajv-formats";
import { readAdminStats } from "../../src/auth/admin_tasks.ts";
import { createOperator } from "../../src/auth/operators.ts";
import { createStatsHistory, type StatsHistory } from "../../src/auth/stats_history.ts";
import { createAdminHandler } from "../../src/http/admin/admin_app.ts";
import { ADMIN_OPENAPI } from "../../src/http/admin/openapi.ts";
import { createHandler, type Handler } from "../../src/http/app.ts";
import { createMetrics, type Metrics } from "../../src/platform/metrics.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import type { Store } from "../../src/store/store.ts";
import { createCapturingLogger } from "./capturing_logger.ts";
import { createFakeClock, type FakeClock } from "./fake_clock.ts";
import { openTestStore } from "./store.ts";

export const ADMIN_BASE = "https://127.0.0.1:9444";
const API_BASE = "https://keygate.test";

const hasher = createPasswordHasher({ workers: 1 });

const ajv = new Ajv2020({ strict: false, allErrors: true });
// ajv-formats is CommonJS: its function is the module's default export's `default`.
(ajvFormats as unknown as { default: (ajv: Ajv2020) => void }).default(ajv);
ajv.addSchema(ADMIN_OPENAPI, "admin-openapi");

type Operation = {
  responses: Record<
    string,
    { $ref?: string; content?: Record<string, { schema?: { $ref: string } }> }
  >;
};

/** The OpenAPI operation for a method and a concrete path, with its template. */
export function findOperation(
  method: string,
  path: string,
): { template: string; operation: Operation } {
  const segments = path.split("/");
  for (const [template, item] of Object.entries(ADMIN_OPENAPI.paths)) {
    const parts = template.split("/");
    if (parts.length !== segments.length) continue;
    if (!parts.every((part, i) => part.startsWith("{") || part === segments[i])) continue;
    const operation = (item as Record<string, Operation>)[method.toLowerCase()];
    if (operation) return { template, operation };
  }
  throw new Error(`No operation in the OpenAPI document for ${method} ${path}`);
}

/** Asserts that a response body matches the document's schema for this operation and status. */
export function assertDocumented(
  method: string,
  path: string,
  status: number,
  body: unknown,
): void {
  const { template, operation } = findOperation(method, path);
  let response = operation.responses[String(status)];
  assert.ok(response, `${method} ${template} does not document status ${status}`);
  if (response.$ref) {
    const name = response.$ref.split("/").pop()!;
    response = (ADMIN_OPENAPI.components.responses as Record<string, typeof response>)[name];
  }
  const ref = response.content?.["application/json"]?.schema?.$ref;
  assert.ok(ref, `${method} ${template} ${status} has no JSON schema`);
  const validate = ajv.getSchema(`admin-openapi${ref}`);
  assert.ok(validate, `schema ${ref} not found`);
  const valid = validate(body);
  assert.ok(
    valid,
    `${method} ${path} ${status}: body does not match ${ref}: ${JSON.stringify(validate.errors)}\n${
      JSON.stringify(body)
    }`,
  );
}

/** A JSON answer of the admin API. */
export interface AdminAnswer {
  status: number;
  headers: Headers;
  // deno-lint-ignore no-explicit-any
  body: any;
}

export interface CallOptions {
  /** Default: the write operator's token; `null` for none. */
  token?: string | null;
  body?: unknown;
  /** A raw body, sent as is (with `headers`). */
  raw?: string;
  headers?: Record<string, string>;
  /** The client address the handler sees. Default 192.0.2.10. */
  client?: string;
}

export interface AdminTest {
  admin: Handler;
  /** The public API's handler on the same store and metrics. */
  api: Handler;
  store: Store;
  clock: FakeClock;
  metrics: Metrics;
  /** The dashboard's history; tests call `sampleNow()`. */
  history: StatsHistory;
  logLines: string[];
  writeToken: string;
  readToken: string;
  /** Calls the admin API and checks the answer against the OpenAPI document. */
  call(method: string, path: string, options?: CallOptions): Promise<AdminAnswer>;
  /** Adds a user with a password through the admin API; resolves to its id. */
  addUser(email: string, password?: string): Promise<number>;
  /** Issues a token through the public API. */
  login(email: string, password: string, apiKey: string): Promise<string>;
  /** A secure request through the public API; resolves to its status. */
  secureStatus(apiKey: string, token: string): Promise<number>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The admin and API handlers over a fresh store, with operators `admin` (write) and `viewer` (read). */
export async function createAdminTest(
  options: {
    portalOrigin?: string;
    /** The store the handlers get, around the real one (to hold a race open). */
    wrapStore?: (store: Store) => Store;
  } = {},
): Promise<AdminTest> {
  const opened = await openTestStore();
  const store = options.wrapStore?.(opened.store) ?? opened.store;
  const clock = createFakeClock();
  const { logger, lines } = createCapturingLogger();
  const metrics = createMetrics({ countLiveTokens: () => store.countLiveTokens(clock.now()) });
  const history = createStatsHistory({
    read: () => readAdminStats({ store, now: clock.now(), readCounters: metrics.readCounters }),
    clock,
  });
  const admin = createAdminHandler({
    store,
    clock,
    logger,
    hasher,
    readCounters: metrics.readCounters,
    defaultTimeoutSeconds: 36000,
    history,
    portalOrigin: options.portalOrigin,
  });
  const api = createHandler({
    store,
    hasher,
    clock,
    logger,
    defaultTimeoutSeconds: 36000,
    metrics,
  });
  const cli = { store, clock, actor: "cli:test" };
  const writeToken = (await createOperator(cli, "admin", "write")).token;
  const readToken = (await createOperator(cli, "viewer", "read")).token;

  async function call(
    method: string,
    path: string,
    options: CallOptions = {},
  ): Promise<AdminAnswer> {
    const token = options.token === undefined ? writeToken : options.token;
    const headers = new Headers(options.headers);
    if (token !== null) headers.set("authorization", `Bearer ${token}`);
    let body: string | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      if (!headers.has("content-type")) headers.set("content-type", "application/json");
    }
    const response = await admin(
      new Request(ADMIN_BASE + path, { method, headers, body }),
      { remoteAddr: { hostname: options.client ?? "192.0.2.10" } },
    );
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    const parsed = await response.json();
    assertDocumented(method, new URL(ADMIN_BASE + path).pathname, response.status, parsed);
    return { status: response.status, headers: response.headers, body: parsed };
  }

  return {
    admin,
    api,
    store,
    clock,
    metrics,
    history,
    logLines: lines,
    writeToken,
    readToken,
    call,
    async addUser(email, password = "correct horse") {
      const answer = await call("POST", "/admin/v1/users", { body: { email, password } });
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
      return answer.body.id;
    },
    async login(email, password, apiKey) {
      const response = await api(
        new Request(`${API_BASE}/api/userservice/tokens`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body: JSON.stringify({ auth_request: { user: { email, password }, api_key: apiKey } }),
        }),
        { remoteAddr: { hostname: "198.51.100.7" } },
      );
      assert.equal(response.status, 200, await response.clone().text());
      return (await response.json()).auth_response.access_token;
    },
    async secureStatus(apiKey, token) {
      const url = new URL(`${API_BASE}/api/secure/userservice/tokens/current`);
      url.searchParams.set("api_key", apiKey);
      url.searchParams.set("api_token", token);
      const response = await api(new Request(url, { headers: { accept: "application/json" } }));
      await response.body?.cancel();
      return response.status;
    },
    [Symbol.asyncDispose]: () => opened[Symbol.asyncDispose](),
  };
}
