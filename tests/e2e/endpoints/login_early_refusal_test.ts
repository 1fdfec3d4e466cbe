/**
 * A login the password pool would refuse is refused first, before the login
 * flow reads anything from the store: the same 503 `service_busy`, the same
 * body and the same `Retry-After` for a known user and an unknown one, and no
 * database work for a storm of refused logins (docs/performance.md, "Login
 * bursts"). With `--workers N` a request worker reads the pool's decision
 * from shared memory and refuses the same way, without a message to the main
 * thread.
 *
 * The pool here is real, with a stand-in password worker that holds each job
 * for a while, so that a test can keep the one worker busy; the store is the
 * suite's real one (SQLite, or PostgreSQL with `KEYGATE_TEST_STORE=postgres`),
 * wrapped to count the calls the handler makes.
 */
import assert from "node:assert/strict";
import { createLogin, toCredentials } from "../../../src/auth/login.ts";
import { AuthError } from "../../../src/auth/errors.ts";
import { createThrottle } from "../../../src/auth/throttle.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import {
  createRemoteHasher,
  type PasswordAnswer,
  type PasswordRequest,
  servePasswordRequests,
} from "../../../src/server/remote_hasher.ts";
import type { Store } from "../../../src/store/store.ts";
import { countRows, openTestStore, type TestStore } from "../../_helpers/store.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { createTestApp } from "../../_helpers/test_app.ts";
import { jsonAuthRequest, postToken } from "../../_helpers/requests.ts";

const EMAIL = "early@example.org";
const PASSWORD = "early refusal pw";
const JSON_IO = { "content-type": "application/json", accept: "application/json" };

/** A store that counts every call made through it while `counting` is on. */
function countCalls(store: Store): { store: Store; calls: string[]; counting: boolean } {
  const counter = { store, calls: [] as string[], counting: false };
  counter.store = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (counter.counting) counter.calls.push(String(name));
        return value.apply(target, args);
      };
    },
  });
  return counter;
}

/**
 * A pool of one stand-in worker that answers each job after `holdMs` (as a hash taking that
 * long would), its hash time believed to be 3 s and its bound 1 s: while the worker holds one
 * job, the next is refused with a Retry-After of 3 s.
 */
async function createBusyablePool(holdMs: number) {
  const dir = await Deno.makeTempDir();
  const workerUrl = new URL(`file://${dir}/worker.js`);
  await Deno.writeTextFile(
    workerUrl,
    `self.onmessage = (e) => setTimeout(
      () => self.postMessage({ id: e.data.id, ok: true, value: e.data.op === "hash" ? "h" : true }),
      ${holdMs},
    );`,
  );
  const pool = createPasswordHasher({
    workers: 1,
    maxWaitMs: 1000,
    initialHashMs: 3000,
    workerUrl,
  });
  return {
    pool,
    [Symbol.asyncDispose]: async () => {
      pool.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test("[e2e] POST /api/userservice/tokens refuses before any store read while the password pool would refuse, alike for a known and an unknown user", async () => {
  await using busyable = await createBusyablePool(5000);
  const { pool } = busyable;
  const wrapped: { counter?: ReturnType<typeof countCalls> } = {};
  await using app = await createTestApp({
    hasher: pool,
    openStore: async (): Promise<TestStore> => {
      const opened = await openTestStore();
      wrapped.counter = countCalls(opened.store);
      return Object.assign(Object.create(opened), { store: wrapped.counter.store });
    },
  });
  const userId = await app.addUser(EMAIL, "unused"); // a stored hash the stand-in accepts
  const apiKey = await app.createKey(userId);
  const count = wrapped.counter!;

  const busy = pool.hash("occupies the one worker");
  assert.equal(pool.findRefusal(), 3);
  count.counting = true;
  const known = await postToken(app.handler, jsonAuthRequest(EMAIL, PASSWORD, apiKey), JSON_IO);
  const unknown = await postToken(
    app.handler,
    jsonAuthRequest("nobody@example.org", PASSWORD, apiKey),
    JSON_IO,
  );
  count.counting = false;
  const answers = [];
  for (const response of [known, unknown]) {
    assert.equal(response.status, 503);
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal(response.headers.get("retry-after"), "3");
    const body = await response.json();
    assert.equal(body.error_response.errors.error[0].error_code, "service_busy");
    answers.push(body);
  }
  assert.deepEqual(answers[0], answers[1]);
  assert.equal(count.calls.length, 0, `a refused login made no store call: ${count.calls}`);
  assert.equal(await countRows(app.store, "tokens"), 0);
  const failures = await app.querySql(
    "SELECT count(*) AS n FROM audit_log WHERE action = 'login.failed'",
  );
  assert.equal(Number(failures[0].n), 0, "a refusal is no failed login");

  // Once the worker is free, the same login reads the store and gets its token: the counter sees
  // the reads a refusal skipped.
  await busy;
  assert.equal(pool.findRefusal(), undefined);
  count.counting = true;
  const admitted = await postToken(app.handler, jsonAuthRequest(EMAIL, PASSWORD, apiKey), JSON_IO);
  count.counting = false;
  assert.equal(admitted.status, 200, await admitted.clone().text());
  assert.match((await admitted.json()).auth_response.access_token, /\S/);
  assert.ok(count.calls.includes("findUserAndKey"), `calls: ${count.calls}`);
  assert.equal(await countRows(app.store, "tokens"), 1);
});

Deno.test("a request worker's login flow refuses from the pool's shared decision, with no message to the main thread and no store read", async () => {
  await using busyable = await createBusyablePool(1500);
  const { pool } = busyable;
  // The two sides back to back, as request_worker.ts and worker_pool.ts wire them; every message
  // crosses as a structured clone (the shared memory as itself, as between threads).
  const toMain: PasswordRequest[] = [];
  const remote = createRemoteHasher({
    postMessage: (message) => {
      toMain.push(message as PasswordRequest);
      main.receive(structuredClone(message) as PasswordRequest);
    },
  });
  const main = servePasswordRequests(pool, {
    postMessage: (message) => remote.receive(structuredClone(message) as PasswordAnswer),
  });
  await using opened = await openTestStore();
  const counter = countCalls(opened.store);
  const clock = createFakeClock();
  const login = createLogin({
    store: counter.store,
    hasher: remote,
    clock,
    throttle: createThrottle({ store: counter.store, clock }),
    defaultTimeoutSeconds: 3600,
  });
  const attempt = {
    credentials: toCredentials(
      { email: EMAIL, password: PASSWORD },
      "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
    ),
    clientAddress: "192.0.2.1",
  };
  try {
    assert.equal(remote.findRefusal(), undefined, "an idle pool admits");
    const busy = remote.hash("occupies the one worker");
    assert.equal(toMain.length, 1);
    assert.equal(remote.findRefusal(), 3, "the worker reads the pool's refusal");
    counter.counting = true;
    await assert.rejects(login(attempt), (error: AuthError) => {
      assert.ok(error instanceof AuthError);
      assert.equal(error.code, "service_busy");
      assert.equal(error.retryAfterSeconds, 3);
      return true;
    });
    assert.equal(counter.calls.length, 0, `store calls: ${counter.calls}`);
    assert.equal(toMain.length, 1, "the refusal sent nothing to the main thread");
    assert.equal(await busy, "h");
    assert.equal(remote.findRefusal(), undefined, "the worker reads the pool's admission again");
  } finally {
    remote.close();
    main.abandon();
  }
});

Deno.test("[e2e] a storm of refused logins writes one 'login failed' line a second, with the count of the others", async () => {
  await using busyable = await createBusyablePool(5000);
  const { pool } = busyable;
  await using app = await createTestApp({ hasher: pool });
  const userId = await app.addUser(EMAIL, "unused");
  const apiKey = await app.createKey(userId);
  const busy = pool.hash("occupies the one worker");
  for (let i = 0; i < 50; i++) {
    const response = await postToken(
      app.handler,
      jsonAuthRequest(EMAIL, PASSWORD, apiKey),
      JSON_IO,
    );
    assert.equal(response.status, 503);
    await response.body?.cancel();
  }
  const busyLines = () =>
    app.logLines.map((line) => JSON.parse(line)).filter((entry) =>
      entry.event === "login_failed" && entry.reason === "service_busy"
    );
  assert.equal(busyLines().length, 1, "one line for the first refusal, none for the 49 after it");
  assert.equal(busyLines()[0].also_refused, undefined);
  // A second later (on the app's clock) the next refusal is logged again, with how many went
  // unlogged meanwhile.
  app.clock.advance(999);
  const early = await postToken(app.handler, jsonAuthRequest(EMAIL, PASSWORD, apiKey), JSON_IO);
  assert.equal(early.status, 503);
  await early.body?.cancel();
  assert.equal(busyLines().length, 1, "still within the second");
  app.clock.advance(1);
  const next = await postToken(app.handler, jsonAuthRequest(EMAIL, PASSWORD, apiKey), JSON_IO);
  assert.equal(next.status, 503);
  await next.body?.cancel();
  assert.equal(busyLines().length, 2);
  assert.equal(busyLines()[1].also_refused, 50);
  await busy;
});
