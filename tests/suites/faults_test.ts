/**
 * Database faults: another process holding the write lock, a full database,
 * and `kill -9` of the server. keygate answers 503 with Retry-After (never a
 * 500, never a 200 for a token it did not store), keeps validating tokens
 * while a writer holds the lock, and recovers without a restart.
 */
import assert from "node:assert/strict";
import { startServerProcess } from "../_helpers/server_process.ts";
import { DatabaseSync } from "node:sqlite";
import { createHandler, type Handler } from "../../src/http/app.ts";
import { toHttpError } from "../../src/http/errors.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { StoreUnavailable } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import { isDatabaseUnavailable, toStoreError } from "../../src/store/sqlite/errors.ts";
import { openSqliteStore, type SqliteStoreOptions } from "../../src/store/sqlite/sqlite_store.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";
import { assertError, jsonAuthRequest, postToken, secureGet } from "../_helpers/requests.ts";
import { addApiKey, addTestUser } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";

const PASSWORD = "correct horse";
const CURRENT = "/api/secure/userservice/tokens/current";
const JSON_HEADERS = { "content-type": "application/json", accept: "application/json" };
const hasher = createPasswordHasher();

interface FaultApp {
  store: Store;
  handler: Handler;
  apiKey: string;
  dbPath: string;
  close(): void;
}

/** A database with alice and one API key of hers; resolves to the key. */
async function seedAlice(path: string, now: number): Promise<string> {
  const seed = openSqliteStore(path);
  try {
    const passwordHash = await hasher.hash(PASSWORD);
    const userId = await addTestUser(seed, "alice@example.org", { passwordHash, now });
    return await addApiKey(seed, userId, now);
  } finally {
    await seed.closeStore();
  }
}

async function createFaultApp(options: SqliteStoreOptions = {}): Promise<FaultApp> {
  const db = tempDbPath();
  const clock = createFakeClock();
  const apiKey = await seedAlice(db.path, clock.now());
  const store = openSqliteStore(db.path, options);
  const handler = createHandler({
    store,
    hasher,
    clock,
    logger: silentLogger,
    defaultTimeoutSeconds: 3600,
  });
  return {
    store,
    handler,
    apiKey,
    dbPath: db.path,
    close() {
      void store.closeStore(); // SQLite closes synchronously
      db.cleanup();
    },
  };
}

/** Another OS process that takes the write lock (BEGIN IMMEDIATE) and holds it until killed. */
async function holdWriteLock(dbPath: string): Promise<Deno.ChildProcess> {
  const code = `
    import { DatabaseSync } from "node:sqlite";
    const db = new DatabaseSync(${JSON.stringify(dbPath)});
    db.exec("BEGIN IMMEDIATE");
    db.exec("INSERT INTO login_failures VALUES ('client:holder', 1, 0, 0, 1)");
    console.log("locked");
    setInterval(() => {}, 60_000);
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--ext=ts", code],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const { value } = await reader.read();
  assert.equal(value?.trim(), "locked");
  reader.releaseLock();
  return child;
}

async function tokenOf(response: Response): Promise<string> {
  assert.equal(response.status, 200);
  return (await response.json()).auth_response.access_token;
}

Deno.test("[e2e] a second process holding the write lock gives 503 on writes, while reads keep working", async () => {
  const app = await createFaultApp({ busyTimeoutMs: 250 });
  let holder: Deno.ChildProcess | undefined;
  try {
    const good = jsonAuthRequest("alice@example.org", PASSWORD, app.apiKey);
    const existing = await tokenOf(await postToken(app.handler, good, JSON_HEADERS));
    const tokensBefore = await app.store.countRows("tokens");

    holder = await holdWriteLock(app.dbPath);

    // Issuing a token needs the write lock: 503 with Retry-After, and no token stored.
    const started = performance.now();
    const issued = await postToken(app.handler, good, JSON_HEADERS);
    const elapsed = performance.now() - started;
    assert.equal(
      await assertError(issued, 503, "service_unavailable", "json"),
      "The database is busy: try again shortly",
    );
    assert.equal(issued.headers.get("retry-after"), "1");
    assert.ok(elapsed >= 200, `gave up after ${elapsed} ms, before the busy timeout`);
    // A wrong password cannot be counted either, so it is refused the same way, not let through.
    const wrong = await postToken(
      app.handler,
      jsonAuthRequest("alice@example.org", "wrong", app.apiKey),
      JSON_HEADERS,
    );
    await assertError(wrong, 503, "service_unavailable", "json");
    // XML callers get the error in XML.
    const xml = await postToken(app.handler, good, { "content-type": "application/json" });
    await assertError(xml, 503, "service_unavailable", "xml");
    // Revoking is a write too.
    const revoke = await app.handler(
      new Request(`https://k.test${CURRENT}?api_key=${app.apiKey}&api_token=${existing}`, {
        method: "DELETE",
      }),
    );
    assert.equal(revoke.status, 503);
    await revoke.body?.cancel();

    // Reads work under WAL: the existing token still validates, and readiness holds.
    const read = await secureGet(app.handler, CURRENT, app.apiKey, existing);
    assert.equal(read.status, 200);
    await read.body?.cancel();
    const ready = await app.handler(new Request("https://k.test/readyz"));
    assert.equal(ready.status, 200);
    await ready.body?.cancel();
    assert.equal(await app.store.countRows("tokens"), tokensBefore);

    // The holder dies mid-transaction (kill -9): its write is rolled back and keygate
    // recovers without a restart.
    holder.kill("SIGKILL");
    await holder.status;
    holder = undefined;
    const after = await tokenOf(await postToken(app.handler, good, JSON_HEADERS));
    const check = await secureGet(app.handler, CURRENT, app.apiKey, after);
    assert.equal(check.status, 200);
    await check.body?.cancel();
    assert.equal(await app.store.countRows("tokens"), tokensBefore + 1);
    assert.equal((await app.store.findLoginFailures(["client:holder"], 0)).length, 0);
  } finally {
    if (holder) {
      holder.kill("SIGKILL");
      await holder.status;
    }
    app.close();
  }
});

Deno.test("[e2e] writes waiting for another process's lock do not block secure requests", async () => {
  const app = await createFaultApp({ busyTimeoutMs: 1500 });
  let holder: Deno.ChildProcess | undefined;
  try {
    const good = jsonAuthRequest("alice@example.org", PASSWORD, app.apiKey);
    const existing = await tokenOf(await postToken(app.handler, good, JSON_HEADERS));
    holder = await holdWriteLock(app.dbPath);
    let writesDone = 0;
    const writes = [1, 2, 3].map(() =>
      postToken(app.handler, good, JSON_HEADERS).then(async (response) => {
        writesDone++;
        await assertError(response, 503, "service_unavailable", "json");
      })
    );
    // Let the writes pass the password check and start waiting for the lock.
    await new Promise((resolve) => setTimeout(resolve, 300));
    // SQLite's own busy wait would freeze the thread until a write gave up; the read would then
    // only be answered after a 503. Waiting between turns of the event loop, it is answered now.
    const read = await secureGet(app.handler, CURRENT, app.apiKey, existing);
    assert.equal(read.status, 200);
    await read.body?.cancel();
    assert.equal(writesDone, 0, "a write gave up before the read was answered");
    await Promise.all(writes);
  } finally {
    if (holder) {
      holder.kill("SIGKILL");
      await holder.status;
    }
    app.close();
  }
});

Deno.test("[e2e] a full database gives 503, and every token answered with 200 was stored", async () => {
  const db = tempDbPath();
  let pages: number;
  {
    // Learn the size of a freshly seeded database, then cap the server's store at it.
    const app = await createFaultApp();
    const raw = new DatabaseSync(app.dbPath);
    pages = (raw.prepare("PRAGMA page_count").get() as { page_count: number }).page_count;
    raw.close();
    app.close();
  }
  const app = await createFaultApp({ maxPageCount: pages + 1 });
  try {
    const good = jsonAuthRequest("alice@example.org", PASSWORD, app.apiKey);
    const issued: string[] = [];
    let full: Response | undefined;
    for (let i = 0; i < 95 && full === undefined; i++) {
      const response = await postToken(app.handler, good, JSON_HEADERS);
      if (response.status === 200) issued.push(await tokenOf(response));
      else full = response;
    }
    assert.ok(full, "the database never filled up");
    await assertError(full, 503, "service_unavailable", "json");
    assert.equal(full.headers.get("retry-after"), "1");
    assert.equal(await app.store.countRows("tokens"), issued.length);
    for (const token of issued) {
      const response = await secureGet(app.handler, CURRENT, app.apiKey, token);
      assert.equal(response.status, 200);
      await response.body?.cancel();
    }
  } finally {
    app.close();
    db.cleanup();
  }
});

Deno.test("[server] kill -9 while issuing tokens loses no token whose 200 was sent", async () => {
  const db = tempDbPath();
  try {
    const apiKey = await seedAlice(db.path, Date.now());

    let server = await startServerProcess(db.path);
    const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
    const client = Deno.createHttpClient({ caCerts: [cert] });
    const issued: string[] = [];
    const body = jsonAuthRequest("alice@example.org", PASSWORD, apiKey);
    // Two callers issue tokens back to back; the server is killed mid-stream.
    const caller = async () => {
      while (true) {
        try {
          const response = await fetch(`${server.origin}/api/userservice/tokens`, {
            client,
            method: "POST",
            headers: JSON_HEADERS,
            body,
          });
          if (response.status !== 200) throw new Error(`status ${response.status}`);
          issued.push((await response.json()).auth_response.access_token);
        } catch {
          return; // The connection died with the server.
        }
      }
    };
    let stopped = 0;
    const callers = [caller(), caller()].map((p) => p.finally(() => stopped++));
    while (issued.length < 20 && stopped === 0) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal(stopped, 0, "a caller failed before the kill");
    server.child.kill("SIGKILL");
    await server.child.status;
    await Promise.all(callers);

    server = await startServerProcess(db.path);
    try {
      for (const token of issued) {
        const response = await fetch(
          `${server.origin}${CURRENT}?api_key=${apiKey}&api_token=${token}`,
          { client },
        );
        assert.equal(response.status, 200, `token ${issued.indexOf(token)} was lost`);
        await response.body?.cancel();
      }
    } finally {
      await server.stop();
      client.close();
    }
  } finally {
    db.cleanup();
  }
});

Deno.test("isDatabaseUnavailable() recognises db.exec() errors, which carry no errcode, by SQLite's text", async () => {
  const db = tempDbPath();
  const store = openSqliteStore(db.path, { busyTimeoutMs: 10 });
  const other = new DatabaseSync(db.path);
  try {
    other.exec("BEGIN IMMEDIATE");
    let thrown: unknown;
    try {
      // BEGIN IMMEDIATE through db.exec(), past the busy retry.
      await store.appendAudit({ at: 0, actor: "test", action: "user.added", subject: "x" });
    } catch (error) {
      thrown = error;
    }
    assert.ok(thrown instanceof StoreUnavailable);
    const cause = thrown.cause;
    assert.ok(cause instanceof Error);
    assert.equal((cause as { errcode?: number }).errcode, undefined);
    assert.equal(isDatabaseUnavailable(cause), true);
    const mapped = toHttpError(thrown);
    assert.equal(mapped.status, 503);
    assert.equal(mapped.code, "service_unavailable");
    // Other SQLite errors stay bugs (500), and the text alone is not enough.
    assert.equal(isDatabaseUnavailable(new Error("database is locked")), false);
    assert.equal(
      toHttpError(
        toStoreError(Object.assign(new Error("no such table: x"), { code: "ERR_SQLITE_ERROR" })),
      ).status,
      500,
    );
  } finally {
    other.exec("ROLLBACK");
    other.close();
    await store.closeStore();
    db.cleanup();
  }
});

Deno.test("[e2e] /readyz reports degraded while writes fail, and ready once they succeed", async () => {
  let pages: number;
  {
    const app = await createFaultApp();
    const raw = new DatabaseSync(app.dbPath);
    pages = (raw.prepare("PRAGMA page_count").get() as { page_count: number }).page_count;
    raw.close();
    app.close();
  }
  const app = await createFaultApp({ maxPageCount: pages + 8 });
  const readyz = () => app.handler(new Request("https://k.test/readyz"));
  try {
    const ready = await readyz();
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { status: "ready" });
    const good = jsonAuthRequest("alice@example.org", PASSWORD, app.apiKey);
    let full: Response | undefined;
    for (let i = 0; i < 400 && full === undefined; i++) {
      const response = await postToken(app.handler, good, JSON_HEADERS);
      if (response.status !== 200) full = response;
      else await response.body?.cancel();
    }
    assert.ok(full, "the database never filled up");
    await assertError(full, 503, "service_unavailable", "json");
    for (let i = 0; i < 2; i++) {
      // Reads still work, but writes do not: a load balancer must steer logins away.
      const degraded = await readyz();
      assert.equal(degraded.status, 503);
      assert.equal(degraded.headers.get("content-type"), "application/json; charset=utf-8");
      assert.deepEqual(await degraded.json(), { status: "degraded", reason: "writes fail" });
    }

    // Space is freed (another connection deletes the tokens): ready again, and logins work.
    const raw = new DatabaseSync(app.dbPath);
    raw.exec("DELETE FROM tokens");
    raw.close();
    const recovered = await readyz();
    assert.equal(recovered.status, 200);
    assert.deepEqual(await recovered.json(), { status: "ready" });
    const login = await postToken(app.handler, good, JSON_HEADERS);
    assert.equal(login.status, 200);
    await login.body?.cancel();
    assert.equal(await app.store.countRows("tokens"), 1);
    assert.equal((await app.store.listLoginFailures(0)).length, 0, "the probe row is gone");
  } finally {
    app.close();
  }
});
