import assert from "node:assert/strict";
import { runAdmin } from "../_helpers/admin_cli.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import { createKeyUsageRecorder } from "../../src/auth/key_usage.ts";
import type { KeyUsage, Store } from "../../src/store/store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { createCapturingLogger } from "../_helpers/capturing_logger.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";
import { BASE, issueToken } from "../_helpers/requests.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { createTestApp, type TestApp } from "../_helpers/test_app.ts";

const CURRENT = "/api/secure/userservice/tokens/current";
const DAY = 86_400_000;

async function listKeys(app: TestApp, ...args: string[]) {
  const run = await runAdmin(app.dbPath, ["key", "list", ...args, "--json"], { clock: app.clock });
  assert.equal(run.code, 0, run.err);
  return JSON.parse(run.out) as Record<string, string | number | null>[];
}

function secureGetFrom(app: TestApp, apiKey: string, token: string, address: string) {
  const url = new URL(BASE + CURRENT);
  url.searchParams.set("api_key", apiKey);
  url.searchParams.set("api_token", token);
  return app.handler(new Request(url), { remoteAddr: { hostname: address } });
}

Deno.test("[e2e] secure requests note key use in memory only; one flush writes them in one go", async () => {
  using app = await createTestApp({ trackKeyUsage: true });
  const userId = await app.addUser("a@b.org", "pw");
  const apiKey = await app.createKey(userId);
  const idle = await app.createKey(userId);
  const keyId = (await app.store.findApiKeyByHash(hashSecret(apiKey)))!.id;
  const token = await issueToken(app.handler, "a@b.org", "pw", apiKey); // use 1

  // Rows changed on this connection: a SQLite counter (PostgreSQL has no per-connection one;
  // there the use count below is the evidence).
  const changesSince = (() => {
    const start = app.sqlite?.countChanges() ?? 0;
    return () => app.sqlite === undefined ? undefined : app.sqlite.countChanges() - start;
  })();
  for (let i = 0; i < 20; i++) {
    app.clock.advance(1000);
    const response = await secureGetFrom(app, apiKey, token, `192.0.2.${i}`);
    assert.equal(response.status, 200);
  }
  const refused = await secureGetFrom(app, apiKey, "x".repeat(40), "198.51.100.1");
  assert.equal(refused.status, 401);
  // The hot path stayed read-only: no row changed, nothing stored yet.
  assert.ok(changesSince() === 0 || changesSince() === undefined);
  assert.equal((await app.store.findApiKeyById(keyId))!.useCount, 0);
  assert.equal(app.keyUsage!.pending(), 1);

  assert.equal(await app.keyUsage!.flush(), 1);
  assert.ok(changesSince() === 1 || changesSince() === undefined); // one UPDATE for the key used
  const key = (await app.store.findApiKeyById(keyId))!;
  assert.deepEqual([key.useCount, key.lastUsedAt, key.lastUsedFrom], [
    21,
    app.clock.now(),
    "192.0.2.19",
  ]);
  assert.equal(app.keyUsage!.pending(), 0);
  assert.equal(await app.keyUsage!.flush(), 0);
  assert.ok(changesSince() === 1 || changesSince() === undefined);

  const [used, unused] = await listKeys(app);
  assert.deepEqual(
    [used.uses, used.last_used_at, used.last_used_from],
    [21, new Date(app.clock.now()).toISOString(), "192.0.2.19"],
  );
  assert.deepEqual([unused.uses, unused.last_used_at, unused.last_used_from], [0, null, null]);
  assert.ok(!JSON.stringify(await listKeys(app)).includes(idle));
});

Deno.test("[e2e] key list --unused 30d lists keys not used (or created) in the last 30 days", async () => {
  using app = await createTestApp({ trackKeyUsage: true });
  const userId = await app.addUser("a@b.org", "pw");
  const active = await app.createKey(userId);
  await app.createKey(userId); // never used
  await app.createKey(userId);
  await app.store.revokeApiKey(3, { now: app.clock.now(), audit: undefined }); // revoked keys are not listed as unused
  assert.deepEqual((await listKeys(app, "--unused", "30d")).map((k) => k.id), []);
  app.clock.advance(31 * DAY);
  const token = await issueToken(app.handler, "a@b.org", "pw", active);
  assert.equal((await secureGetFrom(app, active, token, "192.0.2.1")).status, 200);
  await app.keyUsage!.flush();
  assert.deepEqual((await listKeys(app, "--unused", "30d")).map((k) => k.id), [2]);
  app.clock.advance(30 * DAY);
  assert.deepEqual((await listKeys(app, "--unused", "30d")).map((k) => k.id), [1, 2]);
});

Deno.test("createKeyUsageRecorder() keeps uses whose flush failed and writes them next time", async () => {
  const db = tempDbPath();
  const store = openSqliteStore(db.path);
  try {
    const user = await store.insertUser({
      email: "a@b.org",
      passwordHash: "x",
      tokenTimeoutSeconds: null,
    }, { now: 1, audit: undefined });
    const key = await store.insertApiKey({
      userId: user.id,
      keyHash: hashSecret("k"),
      prefix: "k",
      label: "",
    }, { now: 1, audit: undefined });
    let fail = true;
    let writes = 0;
    const flaky: Pick<Store, "recordKeyUsage"> = {
      async recordKeyUsage(usages) {
        writes++;
        if (fail) throw new Error("database is locked");
        await store.recordKeyUsage(usages);
      },
    };
    const clock = createFakeClock();
    const { logger, lines } = createCapturingLogger();
    const recorder = createKeyUsageRecorder({ store: flaky, clock, logger });
    recorder.record(key.id, "192.0.2.1");
    await assert.rejects(recorder.flush(), /database is locked/);
    clock.advance(5);
    recorder.record(key.id, "192.0.2.2");
    assert.equal(recorder.pending(), 1);
    fail = false;
    recorder.start();
    await recorder.stop(); // stop flushes what is left
    assert.equal(writes, 2);
    assert.equal(recorder.pending(), 0);
    const stored = (await store.findApiKeyById(key.id))!;
    assert.deepEqual([stored.useCount, stored.lastUsedAt, stored.lastUsedFrom], [
      2,
      clock.now(),
      "192.0.2.2",
    ]);
    fail = true;
    recorder.record(key.id, "192.0.2.3");
    await recorder.stop(); // logs instead of throwing at shutdown
    assert.ok(lines.some((line) => line.includes("key usage flush failed")));
  } finally {
    await store.closeStore();
    db.cleanup();
  }
});

Deno.test("recordKeyUsage() adds counts and never moves the last use back in time", async () => {
  const db = tempDbPath();
  const store = openSqliteStore(db.path);
  try {
    const user = await store.insertUser({
      email: "a@b.org",
      passwordHash: "x",
      tokenTimeoutSeconds: null,
    }, { now: 1, audit: undefined });
    const key = await store.insertApiKey({
      userId: user.id,
      keyHash: hashSecret("k"),
      prefix: "k",
      label: "",
    }, { now: 1, audit: undefined });
    await store.recordKeyUsage([{
      apiKeyId: key.id,
      lastUsedAt: 500,
      lastUsedFrom: "a",
      count: 3,
    }]);
    await store.recordKeyUsage([{
      apiKeyId: key.id,
      lastUsedAt: 400,
      lastUsedFrom: "b",
      count: 2,
    }]);
    const stored = (await store.findApiKeyById(key.id))!;
    assert.deepEqual([stored.useCount, stored.lastUsedAt, stored.lastUsedFrom], [5, 500, "a"]);
  } finally {
    await store.closeStore();
    db.cleanup();
  }
});

Deno.test("[e2e] forward-auth and non-secure requests note key use too (the gate records it)", async () => {
  using app = await createTestApp({ trackKeyUsage: true });
  const userId = await app.addUser("a@b.org", "pw");
  const verifyKey = await app.createKey(userId); // used only through nginx auth_request
  const publicKey = await app.createKey(userId); // used only on a non-secure path (404 after the gate)
  const idle = await app.createKey(userId);
  app.clock.advance(31 * DAY);

  const verified = await app.handler(
    new Request(BASE + "/api/userservice/verify", {
      headers: { "x-original-uri": `/api/public/items?api_key=${verifyKey}` },
    }),
    { remoteAddr: { hostname: "192.0.2.7" } },
  );
  assert.equal(verified.status, 200);
  assert.equal(verified.headers.get("x-keygate-key-id"), "1");
  const other = await app.handler(
    new Request(BASE + `/api/public/items?api_key=${publicKey}`),
    { remoteAddr: { hostname: "192.0.2.8" } },
  );
  assert.equal(other.status, 404);
  const denied = await app.handler(
    new Request(BASE + "/api/userservice/verify", {
      headers: { "x-original-uri": `/api/public/items?api_key=${idle}x` },
    }),
  );
  assert.equal(denied.status, 401);

  assert.equal(await app.keyUsage!.flush(), 2);
  const [first, second, third] = await app.store.listApiKeys(userId);
  assert.deepEqual([first.useCount, first.lastUsedFrom], [1, "192.0.2.7"]);
  assert.deepEqual([second.useCount, second.lastUsedFrom], [1, "192.0.2.8"]);
  assert.deepEqual([third.useCount, third.lastUsedAt], [0, null]);
  assert.deepEqual((await listKeys(app, "--unused", "30d")).map((k) => k.id), [3]);
});

Deno.test("[e2e] key list shows a disabled user's keys as user_disabled, and active again once enabled", async () => {
  using app = await createTestApp();
  const userId = await app.addUser("a@b.org", "pw");
  await app.createKey(userId);
  await app.createKey(userId);
  await app.store.updateApiKeyDisabled(2, {
    disabled: true,
    now: app.clock.now(),
    audit: undefined,
  });
  const bob = await app.addUser("bob@b.org", "pw");
  await app.createKey(bob);
  await app.store.updateUserDisabled(userId, {
    disabled: true,
    now: app.clock.now(),
    audit: undefined,
  });
  const status = async () => (await listKeys(app)).map((k) => [k.id, k.status]);
  assert.deepEqual(await status(), [[1, "user_disabled"], [2, "disabled"], [3, "active"]]);
  assert.deepEqual((await listKeys(app, "a@b.org")).map((k) => k.status), [
    "user_disabled",
    "disabled",
  ]);
  await app.store.updateUserDisabled(userId, {
    disabled: false,
    now: app.clock.now(),
    audit: undefined,
  });
  assert.deepEqual(await status(), [[1, "active"], [2, "disabled"], [3, "active"]]);
});

Deno.test("record() counts every use and keeps the latest time and address, out of order too", async () => {
  const written: KeyUsage[][] = [];
  const recorder = createKeyUsageRecorder({
    store: {
      recordKeyUsage: (usages) => {
        written.push(usages.map((u) => ({ ...u })));
        return Promise.resolve();
      },
    },
    clock: createFakeClock(),
    logger: createCapturingLogger().logger,
  });
  recorder.record(7, "192.0.2.1", 1000);
  recorder.record(7, "192.0.2.2", 3000);
  recorder.record(7, "192.0.2.3", 2000); // arrives late: counted, but not the last use
  recorder.record(8, "192.0.2.9", 1500);
  assert.equal(recorder.pending(), 2);
  assert.equal(await recorder.flush(), 2);
  assert.deepEqual(written, [[
    { apiKeyId: 7, lastUsedAt: 3000, lastUsedFrom: "192.0.2.2", count: 3 },
    { apiKeyId: 8, lastUsedAt: 1500, lastUsedFrom: "192.0.2.9", count: 1 },
  ]]);
  assert.equal(recorder.pending(), 0);
});

Deno.test("flushGradually() writes in small transactions, serves other tasks between them, and stop() finishes it", async () => {
  const db = tempDbPath();
  const store = openSqliteStore(db.path);
  try {
    const keys = await addKeys(store, 5);
    const batches: number[] = [];
    const counting: Pick<Store, "recordKeyUsage"> = {
      async recordKeyUsage(usages) {
        batches.push(usages.length);
        await store.recordKeyUsage(usages);
      },
    };
    const recorder = createKeyUsageRecorder({
      store: counting,
      clock: createFakeClock(),
      logger: createCapturingLogger().logger,
      batchKeys: 2,
    });
    for (const key of keys) recorder.record(key.id, "192.0.2.1");
    let otherTaskRan = false;
    setTimeout(() => otherTaskRan = true, 0);
    await recorder.flushGradually();
    assert.deepEqual(batches, [2, 2, 1]);
    assert.ok(otherTaskRan, "a timer ran between the transactions");
    assert.deepEqual(await useCounts(store, keys), [
      1,
      1,
      1,
      1,
      1,
    ]);

    // stop() in the middle of a gradual flush writes the rest at once.
    for (const key of keys) recorder.record(key.id, "192.0.2.2");
    const gradual = recorder.flushGradually(); // writes the first batch, then waits a turn
    assert.equal(recorder.pending(), 3);
    await recorder.stop();
    await gradual;
    assert.equal(recorder.pending(), 0);
    assert.deepEqual(await useCounts(store, keys), [
      2,
      2,
      2,
      2,
      2,
    ]);
  } finally {
    await store.closeStore();
    db.cleanup();
  }
});

Deno.test("flushGradually() keeps what it could not write, and logs instead of throwing", async () => {
  const db = tempDbPath();
  const store = openSqliteStore(db.path);
  try {
    const keys = await addKeys(store, 3);
    let calls = 0;
    const failsSecond: Pick<Store, "recordKeyUsage"> = {
      async recordKeyUsage(usages) {
        if (++calls === 2) throw new Error("database is locked");
        await store.recordKeyUsage(usages);
      },
    };
    const { logger, lines } = createCapturingLogger();
    const recorder = createKeyUsageRecorder({
      store: failsSecond,
      clock: createFakeClock(),
      logger,
      batchKeys: 1,
    });
    for (const key of keys) recorder.record(key.id, "192.0.2.1");
    await recorder.flushGradually();
    assert.equal(recorder.pending(), 2, "the failed batch and the one after it");
    assert.ok(lines.some((line) => line.includes("key usage flush failed")));
    await recorder.flushGradually();
    assert.equal(recorder.pending(), 0);
    assert.deepEqual(await useCounts(store, keys), [1, 1, 1]);
  } finally {
    await store.closeStore();
    db.cleanup();
  }
});

/** The use count of each key, read from the store. */
function useCounts(store: Store, keys: readonly { id: number }[]): Promise<number[]> {
  return Promise.all(keys.map(async (k) => (await store.findApiKeyById(k.id))!.useCount));
}

/** A user with `count` API keys. */
async function addKeys(store: Store, count: number) {
  const user = await store.insertUser({
    email: "a@b.org",
    passwordHash: "x",
    tokenTimeoutSeconds: null,
  }, { now: 1, audit: undefined });
  return await Promise.all(Array.from(
    { length: count },
    (_, i) =>
      store.insertApiKey({
        userId: user.id,
        keyHash: hashSecret(`k${i}`),
        prefix: `k${i}`,
        label: "",
      }, { now: 1, audit: undefined }),
  ));
}
