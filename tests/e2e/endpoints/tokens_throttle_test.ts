import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { createHandler, type Handler } from "../../../src/http/app.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import { migrate } from "../../../src/store/sqlite/migrate.ts";
import { MIGRATIONS } from "../../../src/store/sqlite/migrations.ts";
import { openSqliteStore } from "../../../src/store/sqlite/sqlite_store.ts";
import {
  ACCOUNT_THROTTLE,
  CLIENT_THROTTLE,
  toAccountSubject,
  toClientSubject,
} from "../../../src/auth/throttle.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { assertError, BASE, jsonAuthRequest } from "../../_helpers/requests.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { createTestApp } from "../../_helpers/test_app.ts";

const PASSWORD = "correct horse";

/** POSTs a JSON token request from a given client address. */
function login(handler: Handler, body: string, client = "192.0.2.1"): Promise<Response> {
  return handler(
    new Request(`${BASE}/api/userservice/tokens`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", accept: "application/json" },
    }),
    { remoteAddr: { hostname: client } },
  );
}

async function setup() {
  const app = await createTestApp();
  const userId = await app.addUser("alice@example.org", PASSWORD);
  const apiKey = await app.createKey(userId);
  const keyId = (await app.store.listApiKeys(userId))[0].id;
  return { app, userId, apiKey, keyId };
}

/** Status, body and headers other than date and x-request-id. */
async function snapshot(response: Response) {
  const headers = [...response.headers].filter(([name]) =>
    name !== "date" && name !== "x-request-id"
  );
  return { status: response.status, headers, body: await response.text() };
}

Deno.test("[e2e] POST /api/userservice/tokens answers 429 after 5 failures with the user's key, the same for a correct password", async () => {
  const { app, apiKey, keyId } = await setup();
  using _ = app;
  for (let i = 0; i < ACCOUNT_THROTTLE.threshold; i++) {
    // A different address each time, so that only the account counter grows.
    const response = await login(
      app.handler,
      jsonAuthRequest("alice@example.org", "wrong", apiKey),
      `198.51.100.${i}`,
    );
    await assertError(response, 401, "invalid_credentials", "json");
  }
  const [row] = await app.store.findLoginFailures([toAccountSubject(keyId)], app.clock.now());
  assert.equal(row.failures, 5);

  const correct = await login(app.handler, jsonAuthRequest("alice@example.org", PASSWORD, apiKey));
  const wrong = await login(app.handler, jsonAuthRequest("alice@example.org", "wrong", apiKey));
  assert.equal(correct.headers.get("retry-after"), "1");
  const [a, b] = [await snapshot(correct), await snapshot(wrong)];
  assert.deepEqual(a, b);
  assert.equal(a.status, 429);
  assert.deepEqual(JSON.parse(a.body).error_response.errors.error[0], {
    error_code: "too_many_attempts",
    error_message: "Too many failed logins: try again after the Retry-After delay",
  });
  assert.equal(await app.store.countRows("tokens"), 0);
  // Throttled attempts are not failures: the counter did not grow.
  assert.equal(
    (await app.store.findLoginFailures([toAccountSubject(keyId)], app.clock.now()))[0].failures,
    5,
  );
  // The blocked key's counter is read with every login that names the key, but counts only for
  // the key's own user: another user's e-mail with it gets the uniform 401, not 429.
  await app.addUser("bob@example.org", "bob password");
  const foreign = await login(
    app.handler,
    jsonAuthRequest("bob@example.org", "bob password", apiKey),
    "203.0.113.9",
  );
  await assertError(foreign, 401, "invalid_credentials", "json");

  // The delay passes; a success clears the account counter.
  app.clock.advance(1000);
  const ok = await login(app.handler, jsonAuthRequest("alice@example.org", PASSWORD, apiKey));
  assert.equal(ok.status, 200);
  assert.equal(
    (await app.store.findLoginFailures([toAccountSubject(keyId)], app.clock.now())).length,
    0,
  );
  assert.equal(await app.store.countRows("tokens"), 1);
});

Deno.test("[e2e] POST /api/userservice/tokens doubles the delay with each further failure", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const wrong = jsonAuthRequest("alice@example.org", "wrong", apiKey);
  const retryAfters: (string | null)[] = [];
  for (let i = 0; i < 9; i++) {
    const response = await login(app.handler, wrong, `198.51.100.${i}`);
    await response.body?.cancel();
    if (response.status === 429) {
      retryAfters.push(response.headers.get("retry-after"));
      app.clock.advance(Number(response.headers.get("retry-after")) * 1000);
      i--;
    }
  }
  assert.deepEqual(retryAfters, ["1", "2", "4", "8"]);
});

Deno.test("[e2e] POST /api/userservice/tokens: without the user's key nobody can slow the user down", async () => {
  const { app, keyId, apiKey } = await setup();
  using _ = app;
  const bobId = await app.addUser("bob@example.org", "bob password");
  const bobKey = await app.createKey(bobId);
  const attempts = [
    jsonAuthRequest("alice@example.org", "wrong", bobKey), // another user's key
    jsonAuthRequest("alice@example.org", "wrong", "00000000-0000-4000-8000-000000000000"),
    jsonAuthRequest("nobody@example.org", "wrong", apiKey), // unknown e-mail
  ];
  for (let i = 0; i < 30; i++) {
    const response = await login(app.handler, attempts[i % 3], `198.51.100.${i}`);
    await assertError(response, 401, "invalid_credentials", "json");
  }
  assert.equal(
    (await app.store.findLoginFailures([toAccountSubject(keyId)], app.clock.now())).length,
    0,
  );
  // Only client counters exist: no row names an e-mail or the attacked key.
  assert.equal(await app.store.countRows("login_failures"), 30);
  const ok = await login(app.handler, jsonAuthRequest("alice@example.org", PASSWORD, apiKey));
  assert.equal(ok.status, 200);
});

Deno.test("[e2e] POST /api/userservice/tokens answers 429 to an address after 20 failures, for every account", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const attacker = "203.0.113.9";
  for (let i = 0; i < CLIENT_THROTTLE.threshold; i++) {
    const response = await login(
      app.handler,
      jsonAuthRequest(`user${i}@example.org`, "guess", apiKey),
      attacker,
    );
    await assertError(response, 401, "invalid_credentials", "json");
  }
  const [row] = await app.store.findLoginFailures([toClientSubject(attacker)], app.clock.now());
  assert.equal(row.failures, 20);
  assert.equal(row.blockedUntil, app.clock.now() + 1000);

  const blocked = await login(
    app.handler,
    jsonAuthRequest("alice@example.org", PASSWORD, apiKey),
    attacker,
  );
  await assertError(blocked, 429, "too_many_attempts", "json");
  assert.equal(blocked.headers.get("retry-after"), "1");
  // Another address, and the same user, are unaffected.
  const other = await login(
    app.handler,
    jsonAuthRequest("alice@example.org", PASSWORD, apiKey),
    "192.0.2.50",
  );
  assert.equal(other.status, 200);
  // A success from the attacker's address does not reset its counter.
  app.clock.advance(1000);
  assert.equal(
    (await login(app.handler, jsonAuthRequest("alice@example.org", PASSWORD, apiKey), attacker))
      .status,
    200,
  );
  assert.equal(
    (await app.store.findLoginFailures([toClientSubject(attacker)], app.clock.now()))[0].failures,
    20,
  );
  // An IPv6 client counts per /64: another address in it shares the counter.
  for (let i = 0; i < CLIENT_THROTTLE.threshold; i++) {
    await (await login(
      app.handler,
      jsonAuthRequest("x@example.org", "g", apiKey),
      `2001:db8::${i}`,
    ))
      .body?.cancel();
  }
  await assertError(
    await login(app.handler, jsonAuthRequest("x@example.org", "g", apiKey), "2001:db8::ffff:1"),
    429,
    "too_many_attempts",
    "json",
  );
});

Deno.test("[e2e] POST /api/userservice/tokens forgets failures after the window", async () => {
  const { app, apiKey, keyId } = await setup();
  using _ = app;
  for (let i = 0; i < 4; i++) {
    await (await login(app.handler, jsonAuthRequest("alice@example.org", "wrong", apiKey)))
      .body?.cancel();
  }
  app.clock.advance(ACCOUNT_THROTTLE.windowMs);
  // The fifth failure starts a new count instead of blocking.
  await (await login(app.handler, jsonAuthRequest("alice@example.org", "wrong", apiKey)))
    .body?.cancel();
  const [row] = await app.store.findLoginFailures([toAccountSubject(keyId)], app.clock.now());
  assert.equal(row.failures, 1);
  assert.equal(row.blockedUntil, 0);
  // Forgotten client rows are pruned by later failures.
  assert.equal(await app.store.countRows("login_failures"), 2);
  app.clock.advance(ACCOUNT_THROTTLE.windowMs);
  await (await login(app.handler, jsonAuthRequest("a@b.org", "wrong", apiKey), "192.0.2.99"))
    .body?.cancel();
  assert.equal(await app.store.countRows("login_failures"), 1);
});

Deno.test("[e2e] POST /api/userservice/tokens keeps its counters across a restart", async () => {
  const db = tempDbPath();
  const hasher = createPasswordHasher();
  const clock = createFakeClock();
  const start = () => {
    const store = openSqliteStore(db.path);
    const handler = createHandler({
      store,
      hasher,
      clock,
      logger: silentLogger,
      defaultTimeoutSeconds: 3600,
    });
    return { store, handler };
  };
  let server = start();
  try {
    const user = await server.store.insertUser({
      email: "alice@example.org",
      passwordHash: await hasher.hash(PASSWORD),
      tokenTimeoutSeconds: null,
    }, { now: clock.now(), audit: undefined });
    const apiKey = crypto.randomUUID();
    const { hashSecret } = await import("../../../src/auth/credentials.ts");
    await server.store.insertApiKey({
      userId: user.id,
      keyHash: hashSecret(apiKey),
      prefix: "x",
      label: "",
    }, { now: clock.now(), audit: undefined });
    for (let i = 0; i < 5; i++) {
      await (await login(
        server.handler,
        jsonAuthRequest("alice@example.org", "wrong", apiKey),
        `198.51.100.${i}`,
      )).body?.cancel();
    }
    await server.store.closeStore();
    server = start();
    const response = await login(
      server.handler,
      jsonAuthRequest("alice@example.org", PASSWORD, apiKey),
    );
    await assertError(response, 429, "too_many_attempts", "json");
  } finally {
    await server.store.closeStore();
    db.cleanup();
  }
});

Deno.test("openSqliteStore() upgrades a version-1 database through the login_failures table, keeping its data", async () => {
  const db = tempDbPath();
  try {
    const raw = new DatabaseSync(db.path);
    migrate(raw, MIGRATIONS.filter((m) => m.version === 1));
    raw.exec(
      "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('a@b.org', 'h', 0, 0)",
    );
    raw.close();
    const store = openSqliteStore(db.path);
    try {
      assert.equal(await store.countRows("users"), 1);
      assert.equal(await store.countRows("login_failures"), 0);
    } finally {
      await store.closeStore();
    }
    const check = new DatabaseSync(db.path);
    assert.equal(
      (check.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
      MIGRATIONS.at(-1)!.version,
    );
    check.close();
  } finally {
    db.cleanup();
  }
});

Deno.test("[e2e] POST /api/userservice/tokens in proxy mode throttles the forwarded client, not the proxy", async () => {
  const app = await createTestApp({ proxy: { trustedProxies: ["127.0.0.1/32"] } });
  using _ = app;
  const userId = await app.addUser("alice@example.org", PASSWORD);
  const apiKey = await app.createKey(userId);
  const viaProxy = (body: string, client: string) =>
    app.handler(
      new Request(`${BASE}/api/userservice/tokens`, {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          "x-forwarded-proto": "https",
          "x-forwarded-for": client,
        },
      }),
      { remoteAddr: { hostname: "127.0.0.1" } },
    );
  for (let i = 0; i < CLIENT_THROTTLE.threshold; i++) {
    await assertError(
      await viaProxy(jsonAuthRequest(`u${i}@example.org`, "guess", apiKey), "203.0.113.7"),
      401,
      "invalid_credentials",
      "json",
    );
  }
  await assertError(
    await viaProxy(jsonAuthRequest("alice@example.org", PASSWORD, apiKey), "203.0.113.7"),
    429,
    "too_many_attempts",
    "json",
  );
  // Another client behind the same proxy is not affected.
  const other = await viaProxy(
    jsonAuthRequest("alice@example.org", PASSWORD, apiKey),
    "198.51.100.8",
  );
  assert.equal(other.status, 200);
  await other.body?.cancel();
  assert.equal(
    (await app.store.findLoginFailures([toClientSubject("127.0.0.1")], app.clock.now())).length,
    0,
  );
  assert.equal(
    (await app.store.findLoginFailures([toClientSubject("203.0.113.7")], app.clock.now()))[0]
      .failures,
    CLIENT_THROTTLE.threshold,
  );
});

Deno.test("[e2e] a login in flight when parallel failures block the account gets 429 and no token", async () => {
  const real = createPasswordHasher({ workers: 1 });
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  let entered!: () => void;
  const holding = new Promise<void>((resolve) => entered = resolve);
  // The right password's check waits until the wrong ones have been counted.
  const hasher = {
    hash: (password: string) => real.hash(password),
    async verify(hash: string | undefined, password: string) {
      if (password === PASSWORD) {
        entered();
        await held;
      }
      return await real.verify(hash, password);
    },
    close: () => real.close(),
  };
  const app = await createTestApp({ hasher });
  try {
    const userId = await app.addUser("alice@example.org", PASSWORD);
    const apiKey = await app.createKey(userId);
    const right = login(app.handler, jsonAuthRequest("alice@example.org", PASSWORD, apiKey));
    await holding;
    for (let i = 0; i < ACCOUNT_THROTTLE.threshold; i++) {
      const wrong = await login(app.handler, jsonAuthRequest("alice@example.org", "wrong", apiKey));
      await wrong.body?.cancel();
    }
    release();
    const response = await right;
    await assertError(response, 429, "too_many_attempts", "json");
    assert.equal(await app.store.countRows("tokens"), 0);
  } finally {
    app.close();
    real.close();
  }
});
