/**
 * The real handler over a real store (see store.ts), a movable clock and a capturing
 * logger: what most end-to-end tests call with `new Request(...)`.
 */
import { createHandler, type Handler } from "../../src/http/app.ts";
import type { AppDeps } from "../../src/http/context.ts";
import { createKeyUsageRecorder, type KeyUsageRecorder } from "../../src/auth/key_usage.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import type { Store } from "../../src/store/store.ts";
import type { SqliteMaintenance } from "../../src/store/sqlite/maintenance.ts";
import { createCapturingLogger } from "./capturing_logger.ts";
import { createFakeClock, type FakeClock } from "./fake_clock.ts";
import {
  addApiKey,
  afterExternalWrite,
  openTestStore,
  querySqlAt,
  TEST_STORE_NAME,
  type TestStore,
} from "./store.ts";

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
