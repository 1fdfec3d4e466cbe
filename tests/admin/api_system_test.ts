/**
 * The admin API through its real handler and a real store: the audit log,
 * paging, stats, stats history and throttle counters.
 * Every answer is also checked against the OpenAPI document (see tests/_helpers/admin_api.ts).
 */
import assert from "node:assert/strict";
import { createAdminTest } from "../_helpers/admin_api.ts";

Deno.test("[admin] GET /admin/v1/audit filters by actor, action, subject and time, and pages", async () => {
  await using t = await createAdminTest();
  await t.addUser("a@example.org");
  t.clock.advance(60_000);
  await t.addUser("b@example.org");
  await t.store.appendAudit({
    at: t.clock.now(),
    actor: "cli:root",
    action: "user.added",
    subject: "user:c@x.org",
  });
  const byOperator = await t.call("GET", "/admin/v1/audit?actor=operator:admin&action=user.added");
  assert.equal(byOperator.status, 200);
  assert.deepEqual(byOperator.body.entries.map((e: { subject: string }) => e.subject), [
    "user:b@example.org",
    "user:a@example.org",
  ]);
  const bySubject = await t.call("GET", "/admin/v1/audit?subject=user:a@example.org");
  assert.equal(bySubject.body.entries.length, 1);
  const byTime = await t.call("GET", "/admin/v1/audit?action=user.added&from=2026-01-01T00:00:30Z");
  assert.equal(byTime.body.entries.length, 2);
  const page1 = await t.call("GET", "/admin/v1/audit?limit=2");
  const page2 = await t.call("GET", `/admin/v1/audit?limit=2&cursor=${page1.body.next}`);
  const everything = await t.call("GET", "/admin/v1/audit?limit=200");
  assert.deepEqual(
    [...page1.body.entries, ...page2.body.entries].map((e: { id: number }) => e.id),
    everything.body.entries.slice(0, 4).map((e: { id: number }) => e.id),
  );
  assert.equal((await t.call("GET", "/admin/v1/audit?from=yesterday")).status, 400);
  for (const cursor of ["0", "x!", page1.body.next + "A", btoa('["a",1]')]) {
    const refused = await t.call("GET", `/admin/v1/audit?cursor=${encodeURIComponent(cursor)}`);
    assert.equal(refused.status, 400, cursor);
    assert.equal(refused.body.error.code, "invalid_request");
  }
  // Another list's cursor is refused too: its sort keys are not this list's.
  const users = await t.call("GET", "/admin/v1/users?limit=1");
  assert.equal((await t.call("GET", `/admin/v1/audit?cursor=${users.body.next}`)).status, 400);
});

Deno.test("[admin] every list pages the same way: limit, cursor and next", async () => {
  await using t = await createAdminTest();
  const ids: number[] = [];
  for (const email of ["carol@x.org", "alice@y.org", "bob@x.org"]) {
    const userId = await t.addUser(email);
    ids.push(userId);
    for (let i = 0; i < 2; i++) {
      assert.equal(
        (await t.call("POST", `/admin/v1/users/${userId}/keys`, { body: {} })).status,
        201,
      );
    }
  }
  for (let i = 0; i < 5; i++) {
    await t.store.recordLoginFailures([`client:192.0.2.${i}`], {
      now: t.clock.now(),
      audit: undefined,
      next: () => ({
        subject: `client:192.0.2.${i}`,
        failures: 1,
        lastFailureAt: t.clock.now(),
        blockedUntil: i % 2 === 0 ? t.clock.now() + 60_000 : 0,
        forgetAt: t.clock.now() + 3_600_000,
      }),
    });
  }
  const lists: [string, string][] = [
    ["/admin/v1/users", "users"],
    ["/admin/v1/keys", "keys"],
    [`/admin/v1/users/${ids[0]}/keys`, "keys"],
    [`/admin/v1/users/${ids[0]}/tokens`, "tokens"],
    ["/admin/v1/throttle", "counters"],
    ["/admin/v1/audit", "entries"],
  ];
  for (const [path, field] of lists) {
    const whole = await t.call("GET", `${path}?limit=200`);
    assert.equal(whole.status, 200, path);
    assert.equal(whole.body.next, null, path);
    const paged: unknown[] = [];
    let page = await t.call("GET", `${path}?limit=1`);
    for (let i = 0; i < 50; i++) {
      assert.equal(page.status, 200, path);
      assert.ok(page.body[field].length <= 1, `${path}: limit=1 gives at most one row`);
      paged.push(...page.body[field]);
      if (page.body.next === null) break;
      page = await t.call("GET", `${path}?limit=1&cursor=${page.body.next}`);
    }
    assert.deepEqual(paged, whole.body[field], path);
  }
  // The reproduction: ?limit=1 on the key list gave every key with next: null.
  const one = await t.call("GET", "/admin/v1/keys?limit=1");
  assert.equal(one.body.keys.length, 1);
  assert.equal(one.body.keys[0].email, "alice@y.org");
  assert.notEqual(one.body.next, null);
  const blocked = await t.call("GET", "/admin/v1/throttle?limit=3");
  assert.deepEqual(blocked.body.counters.map((c: { blocked: boolean }) => c.blocked), [
    true,
    true,
    true,
  ]);
  assert.equal((await t.call("GET", "/admin/v1/stats")).body.throttled_subjects, 3);
});

Deno.test("[admin] GET /admin/v1/stats counts rows, live tokens and the metric totals", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  const apiKey = (await t.call("POST", `/admin/v1/users/${id}/keys`, { body: {} })).body.api_key;
  await t.login("ann@example.org", "correct horse", apiKey);
  const stats = await t.call("GET", "/admin/v1/stats", { token: t.readToken });
  assert.equal(stats.status, 200);
  assert.deepEqual(stats.body, {
    at: "2026-01-01T00:00:00.000Z",
    users: 1,
    api_keys: 1,
    live_tokens: 1,
    throttled_subjects: 0,
    counters: {
      tokens_issued: 1,
      login_failures: 0,
      throttled_requests: 0,
      secure_allowed: 0,
      secure_denied: 0,
    },
  });
});

Deno.test("[admin] GET /admin/v1/stats/history returns the samples taken, oldest first", async () => {
  await using t = await createAdminTest();
  const empty = await t.call("GET", "/admin/v1/stats/history", { token: t.readToken });
  assert.equal(empty.status, 200);
  assert.deepEqual(empty.body, { interval_seconds: 60, samples: [] });
  await t.history.sampleNow();
  t.clock.advance(60_000);
  await t.addUser("ann@example.org");
  await t.history.sampleNow();
  const answer = await t.call("GET", "/admin/v1/stats/history", { token: t.readToken });
  assert.deepEqual(
    answer.body.samples.map((s: { at: string; users: number }) => [s.at, s.users]),
    [["2026-01-01T00:00:00.000Z", 0], ["2026-01-01T00:01:00.000Z", 1]],
  );
});

Deno.test("[admin] GET /admin/v1/throttle lists counters and POST .../clear forgets them", async () => {
  await using t = await createAdminTest();
  for (let i = 0; i < 2; i++) {
    await t.call("GET", "/admin/v1/me", { token: "kgo_" + "b".repeat(40) });
  }
  const list = await t.call("GET", "/admin/v1/throttle");
  assert.equal(list.status, 200);
  assert.deepEqual(
    list.body.counters.map((c: { subject: string; failures: number }) => [c.subject, c.failures]),
    [
      ["admin:192.0.2.10", 2],
    ],
  );
  await t.store.recordLoginFailures(["client:203.0.113.5"], {
    now: t.clock.now(),
    next: (_p, subject) => ({
      subject,
      failures: 1,
      lastFailureAt: t.clock.now(),
      blockedUntil: 0,
      forgetAt: t.clock.now() + 60_000,
    }),
    audit: undefined,
  });
  const cleared = await t.call("POST", "/admin/v1/throttle/clear", {
    body: { target: "203.0.113.5" },
  });
  assert.deepEqual(cleared.body, { cleared: 1 });
  assert.equal((await t.store.findLoginFailures(["client:203.0.113.5"], t.clock.now())).length, 0);
  const unknown = await t.call("POST", "/admin/v1/throttle/clear", {
    body: { target: "nobody@x.org" },
  });
  assert.equal(unknown.status, 404);
});
