import type { TokenBatch } from "../../src/store/store.ts";
import assert from "node:assert/strict";
import { createJanitor } from "../../src/auth/janitor.ts";
import { createMetrics } from "../../src/platform/metrics.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { createCapturingLogger } from "../_helpers/capturing_logger.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";
import { assertError, issueToken, secureGet } from "../_helpers/requests.ts";
import { addApiKey, addTestToken, addTestUser } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { createTestApp } from "../_helpers/test_app.ts";

const HOUR = 3600_000;
const DAY = 24 * HOUR;
const CURRENT = "/api/secure/userservice/tokens/current";

/** A user whose tokens live one hour, and an API key. */
async function setup() {
  const app = await createTestApp();
  const userId = await app.addUser("j@example.org", "pw", 3600);
  const apiKey = await app.createKey(userId);
  return { app, userId, apiKey };
}

Deno.test("janitor sweep() deletes only expired and revoked rows past retention", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const { logger, lines } = createCapturingLogger();
  const metrics = createMetrics();
  const janitor = createJanitor({
    store: app.store,
    clock: app.clock,
    logger,
    metrics,
    retentionSeconds: 7 * 86400,
  });
  // t0: A will expire; B will be revoked at t0 + 30 min.
  const a = await issueToken(app.handler, "j@example.org", "pw", apiKey);
  const b = await issueToken(app.handler, "j@example.org", "pw", apiKey);
  app.clock.advance(HOUR / 2);
  const revoke = await app.handler(
    new Request(`https://keygate.test${CURRENT}?api_key=${apiKey}&api_token=${b}`, {
      method: "DELETE",
    }),
  );
  assert.equal(revoke.status, 204);
  // Six days later, A expired six days ago and still says so.
  app.clock.advance(6 * DAY);
  assert.equal(await janitor.sweep(), 0);
  assert.equal(await app.store.countRows("tokens"), 2);
  await assertError(await secureGet(app.handler, CURRENT, apiKey, a), 401, "token_expired");

  // Seven days after A expired (t0 + 1 h + 7 d): A goes, B (revoked at t0 + 30 min) too, C stays.
  app.clock.set(Date.parse("2026-01-01T00:00:00Z") + HOUR + 7 * DAY);
  const c = await issueToken(app.handler, "j@example.org", "pw", apiKey);
  assert.equal(await janitor.sweep(), 2);
  assert.equal(await app.store.countRows("tokens"), 1);
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, c)).status, 200);
  await assertError(await secureGet(app.handler, CURRENT, apiKey, a), 401, "invalid_token");
  assert.deepEqual(JSON.parse(lines.at(-1)!).deleted, 2);
  assert.match(await metrics.render(), /^keygate_tokens_purged_total 2$/m);
});

Deno.test("janitor sweep() deletes in batches of at most batchRows rows until one finds none", async () => {
  const { app, userId } = await setup();
  using _ = app;
  const keyId = (await app.store.listApiKeys())[0].id;
  const start = app.clock.now();
  // 23 rows: even ids expired 29 days ago, odd ids live.
  for (let i = 1; i <= 23; i++) {
    const hash = new Uint8Array(32);
    hash[0] = i;
    const expired = i % 2 === 0;
    await app.store.insertToken({
      tokenHash: hash,
      userId,
      apiKeyId: keyId,
      issuedAt: expired ? start - 30 * DAY : start,
      expiresAt: expired ? start - 29 * DAY : start + HOUR,
      maxLiveTokens: 1000,
    }, { audit: undefined });
  }
  // Two live ones revoked: 23 two days ago (past retention), 21 just now (within it).
  assert.ok(await app.store.revokeToken(23, { now: start - 2 * DAY, audit: undefined }));
  assert.ok(await app.store.revokeToken(21, { now: start, audit: undefined }));
  const batches: [number, number][] = [];
  const deleteEndedTokens = app.store.deleteEndedTokens;
  const store = {
    ...app.store,
    async deleteEndedTokens(batch: TokenBatch) {
      const count = await deleteEndedTokens(batch);
      batches.push([batch.size, count]);
      return count;
    },
  };
  const janitor = createJanitor({
    store,
    clock: app.clock,
    logger: createCapturingLogger().logger,
    retentionSeconds: 86400,
    batchRows: 5,
  });
  assert.equal(await janitor.sweep(), 12);
  // Batches of at most 5 rows, until one finds none.
  assert.deepEqual(batches, [[5, 5], [5, 5], [5, 2], [5, 0]]);
  assert.equal(await app.store.countRows("tokens"), 11);
  assert.equal(await app.store.countLiveTokens(app.clock.now()), 10);
  assert.equal(await janitor.sweep(), 0);
});

Deno.test("janitor sweep() goes on past a short batch: only a batch that finds none ends it", async () => {
  const { app } = await setup();
  using _ = app;
  // A row ended in two ways takes two places of a batch: a short batch may leave rows behind.
  const answers = [3, 5, 1, 0, 7];
  const sizes: number[] = [];
  const store = {
    ...app.store,
    deleteEndedTokens(batch: TokenBatch) {
      sizes.push(batch.size);
      return Promise.resolve(answers.shift()!);
    },
  };
  const metrics = createMetrics();
  const janitor = createJanitor({
    store,
    clock: app.clock,
    logger: createCapturingLogger().logger,
    metrics,
    retentionSeconds: 60,
    batchRows: 5,
  });
  assert.equal(await janitor.sweep(), 9);
  assert.deepEqual(sizes, [5, 5, 5, 5]);
  assert.match(await metrics.render(), /^keygate_tokens_purged_total 9$/m);
});

Deno.test("janitor start() sweeps at once and stop() ends it", async () => {
  const { app, userId } = await setup();
  using _ = app;
  const keyId = (await app.store.listApiKeys())[0].id;
  await app.store.insertToken({
    tokenHash: new Uint8Array(32).fill(7),
    userId,
    apiKeyId: keyId,
    issuedAt: app.clock.now() - 10 * DAY,
    expiresAt: app.clock.now() - 9 * DAY,
    maxLiveTokens: 100,
  }, { audit: undefined });
  const { logger, lines } = createCapturingLogger();
  const janitor = createJanitor({
    store: app.store,
    clock: app.clock,
    logger,
    retentionSeconds: 86400,
  });
  const logged = new Promise<void>((resolve) => {
    const push = lines.push.bind(lines);
    lines.push = (...items: string[]) => {
      const n = push(...items);
      resolve();
      return n;
    };
  });
  janitor.start();
  await logged;
  await janitor.stop();
  assert.equal(await app.store.countRows("tokens"), 0);
  assert.equal(JSON.parse(lines[0]).event, "janitor");
});

Deno.test("janitor start() sweeps only while claimTurn() says it is this instance's turn", async () => {
  const { app } = await setup();
  using _ = app;
  const ranges: string[] = [];
  const store = {
    ...app.store,
    deleteEndedTokens: (batch: TokenBatch) => {
      ranges.push("swept");
      return app.store.deleteEndedTokens(batch);
    },
  };
  const turns = [false, true];
  const asked: number[] = [];
  const janitor = createJanitor({
    store,
    clock: app.clock,
    logger: createCapturingLogger().logger,
    retentionSeconds: 60,
    intervalMs: 5,
    claimTurn: (now) => {
      asked.push(now);
      return Promise.resolve(turns.shift() ?? false);
    },
  });
  janitor.start();
  while (asked.length < 3) await new Promise((resolve) => setTimeout(resolve, 5));
  await janitor.stop();
  assert.deepEqual(ranges, ["swept"], "one sweep: the turn it was given");
  assert.equal(asked[0], app.clock.now());
});

Deno.test("janitor: two servers' janitors on one SQLite file sweep at once, each row deleted once", async () => {
  // docs/deploy.md supports two servers on one file; SQLite has no lease, so both may sweep.
  using db = tempDbPath();
  const first = openSqliteStore(db.path);
  const second = openSqliteStore(db.path);
  try {
    const now = Date.parse("2026-01-01T00:00:00Z");
    const userId = await addTestUser(first, "j@example.org", { now });
    await addApiKey(first, userId, now);
    for (let i = 0; i < 500; i++) {
      await addTestToken(first, {
        userId,
        apiKeyId: 1,
        issuedAt: now,
        expiresAt: now + HOUR,
        secret: `t${String(i).padStart(39, "0")}`,
      });
    }
    await addTestToken(first, {
      userId,
      apiKeyId: 1,
      issuedAt: now,
      expiresAt: now + 30 * DAY,
      secret: "live".padEnd(40, "x"),
    });
    const clock = createFakeClock(now + HOUR + 8 * DAY);
    const { logger } = createCapturingLogger();
    const janitorOf = (store: typeof first) =>
      createJanitor({ store, clock, logger, retentionSeconds: 7 * 86400, batchRows: 50 });
    const deleted = await Promise.all([janitorOf(first).sweep(), janitorOf(second).sweep()]);
    assert.equal(deleted[0] + deleted[1], 500, `deleted ${deleted.join(" + ")}`);
    assert.equal(await first.countRows("tokens"), 1, "the live token stays");
  } finally {
    await first.closeStore();
    await second.closeStore();
  }
});

Deno.test("janitor sweep() deletes audit rows past --audit-retention in batches and records it", async () => {
  const { app } = await setup();
  using _ = app;
  const start = app.clock.now();
  for (let i = 0; i < 7; i++) {
    await app.store.appendAudit({
      at: start + i * DAY,
      actor: "cli:test",
      action: "user.added",
      subject: `user:${i}@example.org`,
      detail: {},
    });
  }
  const rows = await app.store.countRows("audit_log");
  const { logger, lines } = createCapturingLogger();
  const options = { store: app.store, clock: app.clock, logger, retentionSeconds: 7 * 86400 };
  app.clock.set(start + 32 * DAY + HOUR);
  // Off (the default): nothing goes.
  await createJanitor(options).sweep();
  assert.equal(await app.store.countRows("audit_log"), rows);
  // 30 days, in batches of 2: the rows written before start + 2 d + 1 h go (days 0, 1, 2).
  const janitor = createJanitor({ ...options, auditRetentionSeconds: 30 * 86400, batchRows: 2 });
  await janitor.sweep();
  const kept = (await app.store.listAudit()).map((row) => row.subject);
  assert.ok(!kept.includes("user:2@example.org") && kept.includes("user:3@example.org"));
  assert.equal(await app.store.countRows("audit_log"), rows - 3 + 1);
  const [record] = (await app.store.listAudit()).filter((row) => row.action === "audit.pruned");
  assert.equal(record.actor, "janitor");
  assert.deepEqual(record.detail, {
    deleted: 3,
    before: new Date(start + 2 * DAY + HOUR).toISOString(),
  });
  assert.equal(JSON.parse(lines.at(-1)!).audit_deleted, 3);
  // Nothing more to prune: no further record.
  await janitor.sweep();
  assert.equal((await app.store.listAudit()).filter((r) => r.action === "audit.pruned").length, 1);
});

Deno.test("janitor sweep() deletes sign-ups unverified past --portal-unverified-ttl, audited by opaque ids", async () => {
  const { app } = await setup();
  using _ = app;
  const start = app.clock.now();
  async function signUp(email: string, at: number) {
    return await app.store.insertPortalUser(
      { email, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
      {
        now: at,
        state: "pending_verification",
        code: { purpose: "verify", codeHash: new Uint8Array(32), expiresAt: at + DAY },
        mail: { recipient: email, subject: "Verify", text: "code" },
        audit: {
          at,
          actor: "portal:192.0.2.1",
          action: "portal.signed_up",
          subject: `user:${email}`,
          detail: {},
        },
      },
    );
  }
  const old = await Promise.all(
    [0, 1, 2].map((i) => signUp(`old${i}@example.org`, start + i * HOUR)),
  );
  const verified = await signUp("verified@example.org", start);
  await app.store.updatePortalState(verified.id, { now: start, state: "active", audit: undefined });
  const recent = await signUp("recent@example.org", start + 6 * DAY);
  const { logger, lines } = createCapturingLogger();
  const options = { store: app.store, clock: app.clock, logger, retentionSeconds: 7 * 86400 };
  app.clock.set(start + 7 * DAY + 3 * HOUR);
  // Off (undefined or 0): nothing goes.
  await createJanitor({ ...options, unverifiedTtlSeconds: 0 }).sweep();
  assert.notEqual(await app.store.findUserById(old[0].id), undefined);
  // Seven days, in batches of 2: the three older sign-ups go; verified and recent ones stay.
  const janitor = createJanitor({ ...options, unverifiedTtlSeconds: 7 * 86400, batchRows: 2 });
  await janitor.sweep();
  for (const user of old) assert.equal(await app.store.findUserById(user.id), undefined);
  assert.notEqual(await app.store.findUserById(verified.id), undefined);
  assert.notEqual(await app.store.findUserById(recent.id), undefined);
  const records = (await app.store.listAudit()).filter((r) =>
    r.action === "portal.unverified_deleted"
  );
  assert.equal(records.length, 3);
  for (const record of records) {
    assert.equal(record.actor, "janitor");
    assert.match(record.subject, /^user:deleted:[A-Za-z0-9_-]{16}$/);
    assert.doesNotMatch(JSON.stringify(record), /example\.org/, "never the e-mail");
  }
  assert.equal(new Set(records.map((r) => r.subject)).size, 3, "one random id each");
  // Each account's sign-up row took its id, in the deletion's transaction: no row names it.
  const audit = await app.store.listAudit();
  assert.deepEqual(audit.filter((r) => /old\d@example\.org/.test(JSON.stringify(r))), []);
  for (const record of records) {
    assert.deepEqual(record.detail.audit_rows_anonymized, 1);
    assert.deepEqual(
      audit.filter((r) => r.subject === record.subject).map((r) => r.action),
      ["portal.signed_up", "portal.unverified_deleted"],
    );
  }
  assert.equal(JSON.parse(lines.at(-1)!).unverified_deleted, 3);
  await janitor.sweep();
  assert.equal(
    (await app.store.listAudit()).filter((r) => r.action === "portal.unverified_deleted").length,
    3,
  );
});

/**
 * A janitor over the app's store (retention an hour) and the `endedSince` of each of its batches
 * in order; `batch` runs a batch (default: the store's).
 */
function watchWindows(
  app: Awaited<ReturnType<typeof setup>>["app"],
  batch: (run: () => Promise<number>) => Promise<number> = (run) => run(),
) {
  const windows: (number | undefined)[] = [];
  const store = {
    ...app.store,
    deleteEndedTokens(tokens: TokenBatch) {
      windows.push(tokens.endedSince);
      return batch(() => app.store.deleteEndedTokens(tokens));
    },
  };
  const janitor = createJanitor({
    store,
    clock: app.clock,
    logger: createCapturingLogger().logger,
    retentionSeconds: 3600,
    intervalMs: 60_000,
  });
  return { janitor, windows };
}

Deno.test("janitor: after a sweep that found nothing left, the next looks only at keys and users that ended since, less an hour; at every one a day later", async () => {
  const { app, userId } = await setup();
  using _ = app;
  const { janitor, windows } = watchWindows(app);
  await app.createKey(userId);
  const [keyA, keyB] = (await app.store.listApiKeys()).map((key) => key.id).sort((a, b) => a - b);
  // Tokens that only their key's revocation ends (they expire in 30 days).
  const insert = (n: number, apiKeyId: number) =>
    app.store.insertToken({
      tokenHash: new Uint8Array(32).fill(n),
      userId,
      apiKeyId,
      issuedAt: app.clock.now(),
      expiresAt: app.clock.now() + 30 * DAY,
      maxLiveTokens: 100,
    }, { audit: undefined });
  await insert(1, keyA);
  assert.equal(await app.store.revokeApiKey(keyA, { now: app.clock.now(), audit: undefined }), 1);
  app.clock.advance(2 * HOUR);
  // The first sweep looks at every key: key A's token goes.
  const firstCutoff = app.clock.now() - HOUR;
  assert.equal(await janitor.sweep(), 1);
  assert.deepEqual(windows.splice(0), [undefined, undefined]);
  // A row of key A that reappears (as from a restored backup): key A ended before the window of
  // the timed sweeps, which do not see it.
  await insert(2, keyA);
  app.clock.advance(10 * 60_000);
  assert.equal(await janitor.sweep(), 0);
  assert.deepEqual(windows.splice(0), [firstCutoff - HOUR]);
  // Key B's revocation falls in the window: its token goes.
  await insert(3, keyB);
  assert.equal(await app.store.revokeApiKey(keyB, { now: app.clock.now(), audit: undefined }), 1);
  const secondCutoff = app.clock.now() - HOUR;
  app.clock.advance(2 * HOUR);
  assert.equal(await janitor.sweep(), 1);
  assert.deepEqual(windows.splice(0), [secondCutoff - HOUR, secondCutoff - HOUR]);
  assert.equal(await app.store.countRows("tokens"), 1);
  // A day after the first, a sweep looks at every key again: the reappeared row goes.
  app.clock.advance(DAY);
  assert.equal(await janitor.sweep(), 1);
  assert.deepEqual(windows.splice(0), [undefined, undefined]);
  assert.equal(await app.store.countRows("tokens"), 0);
});

Deno.test("janitor: a sweep that failed, or a clock set back, makes the next look at every key and user", async () => {
  const { app } = await setup();
  using _ = app;
  let fail = false;
  const { janitor, windows } = watchWindows(
    app,
    (run) => fail ? Promise.reject(new Error("database gone")) : run(),
  );
  const sweep = async () => {
    await janitor.sweep();
    return windows.splice(0);
  };
  assert.deepEqual(await sweep(), [undefined]);
  app.clock.advance(HOUR);
  assert.deepEqual(await sweep(), [app.clock.now() - 3 * HOUR]);
  fail = true;
  app.clock.advance(HOUR);
  await assert.rejects(janitor.sweep(), /database gone/);
  windows.length = 0;
  fail = false;
  // The failed sweep found nothing left: the one after it knows only the sweep before.
  app.clock.advance(HOUR);
  assert.deepEqual(await sweep(), [app.clock.now() - 4 * HOUR]);
  // A clock set back: the next sweep looks at every key and user.
  app.clock.advance(-2 * HOUR);
  assert.deepEqual(await sweep(), [undefined]);
});

Deno.test("janitor: a sweep stopped before a batch found nothing left makes the next look at every key and user", async () => {
  const { app } = await setup();
  using _ = app;
  let stopping: Promise<void> | undefined;
  const { janitor, windows } = watchWindows(app, async (run) => {
    // As if rows were left: the sweep would go on to another batch, but is stopped first.
    const count = await run() + 1;
    stopping ??= janitor.stop();
    return count;
  });
  const stoppedDuring = async () => {
    stopping = undefined;
    janitor.start();
    while (stopping === undefined) await new Promise((resolve) => setTimeout(resolve, 1));
    await stopping;
    return windows.splice(0);
  };
  // The sweep at start is stopped during its first batch: it tells the next one nothing, which
  // looks at every key and user again (it would look only since the first's cutoff, less an
  // hour, had that one found nothing left: the tests above).
  assert.deepEqual(await stoppedDuring(), [undefined]);
  app.clock.advance(HOUR);
  assert.deepEqual(await stoppedDuring(), [undefined]);
});
