/**
 * Limits through the admin API (its OpenAPI document checks every answer): set, replaced,
 * listed, removed, audited as operator:NAME; a read-only operator refused; hostile bodies 400;
 * and a key's and a user's usage after secure requests through the public API.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createAdminTest } from "../_helpers/admin_api.ts";

Deno.test("[admin] POST /admin/v1/limits sets a key's rate, a user's quota and the default; GET lists them; DELETE removes one", async () => {
  await using t = await createAdminTest();
  const userId = await t.addUser("ann@example.org");
  const created = await t.call("POST", `/admin/v1/users/${userId}/keys`, { body: {} });
  const keyId = created.body.key.id;
  const apiKey = created.body.api_key;

  const rate = await t.call("POST", "/admin/v1/limits", {
    body: { applies_to: "key", subject_id: keyId, kind: "rate", limit: "2/minute" },
  });
  assert.equal(rate.status, 200);
  assert.deepEqual({ ...rate.body, created_at: "", updated_at: "" }, {
    id: rate.body.id,
    applies_to: "key",
    subject_id: keyId,
    kind: "rate",
    limit: "2/minute",
    max: 2,
    period: "minute",
    created_at: "",
    updated_at: "",
  });
  const quota = await t.call("POST", "/admin/v1/limits", {
    body: { applies_to: "user", subject_id: userId, kind: "quota", limit: "100,000/month" },
  });
  assert.equal(quota.status, 200);
  assert.equal(quota.body.limit, "100000/month");
  const fallback = await t.call("POST", "/admin/v1/limits", {
    body: { applies_to: "default", kind: "rate", limit: "10/second" },
  });
  assert.equal(fallback.body.subject_id, null);
  const listed = await t.call("GET", "/admin/v1/limits", { token: t.readToken });
  assert.deepEqual(listed.body.limits.map((l: { limit: string }) => l.limit), [
    "10/second",
    "2/minute",
    "100000/month",
  ]);

  // Usage after two secure requests: the key's rate is spent, the user's quota has 99,998 left.
  const token = await t.login("ann@example.org", "correct horse", apiKey);
  assert.deepEqual(
    [await t.secureStatus(apiKey, token), await t.secureStatus(apiKey, token)],
    [200, 200],
  );
  assert.equal(await t.secureStatus(apiKey, token), 429);
  const usage = await t.call("GET", `/admin/v1/keys/${keyId}/limits`, { token: t.readToken });
  assert.equal(usage.status, 200);
  const byKind = Object.fromEntries(
    usage.body.limits.map((u: { kind: string }) => [u.kind, u]),
  );
  assert.equal(byKind.rate.limit, "2/minute");
  assert.equal(byKind.rate.used, 2);
  assert.equal(byKind.rate.remaining, 0);
  assert.equal(byKind.quota.applies_to, "user");
  assert.ok(byKind.quota.remaining <= 99_998, String(byKind.quota.remaining));
  const ofUser = await t.call("GET", `/admin/v1/users/${userId}/limits`);
  assert.deepEqual(ofUser.body.limits.map((u: { kind: string }) => u.kind), ["quota"]);

  const removed = await t.call("DELETE", `/admin/v1/limits/${rate.body.id}`);
  assert.equal(removed.status, 200);
  assert.equal(removed.body.id, rate.body.id);
  const again = await t.call("DELETE", `/admin/v1/limits/${rate.body.id}`);
  assert.equal(again.status, 404);
  assert.equal(again.body.error.code, "not_found");
  const audit = await t.store.searchAudit({ limit: 10, actor: "operator:admin" });
  assert.deepEqual(
    audit.filter((row) => row.action.startsWith("limit.")).map((row) => [row.action, row.subject]),
    [
      ["limit.removed", `api_key:${keyId}`],
      ["limit.set", "limits:default"],
      ["limit.set", "user:ann@example.org"],
      ["limit.set", `api_key:${keyId}`],
    ],
  );
});

Deno.test("[admin] POST /admin/v1/limits refuses a read-only operator (403) and malformed limits (400, 404)", async () => {
  await using t = await createAdminTest();
  const userId = await t.addUser("ann@example.org");
  const body = { applies_to: "user", subject_id: userId, kind: "rate", limit: "5/second" };
  const forbidden = await t.call("POST", "/admin/v1/limits", { token: t.readToken, body });
  assert.equal(forbidden.status, 403);
  for (
    const [wrong, message] of [
      [{ ...body, limit: "5/fortnight" }, /Invalid rate "5\/fortnight"/],
      [{ ...body, limit: "-1/second" }, /Invalid rate/],
      [{ ...body, limit: "99999999999999/second" }, /from 0 to 1000000000000/],
      [{ ...body, kind: "burst" }, /Invalid "kind"/],
      [{ ...body, applies_to: "everyone" }, /Invalid "applies_to"/],
      [{ ...body, subject_id: "1" }, /Invalid "subject_id"/],
      [{ applies_to: "default", subject_id: 1, kind: "rate", limit: "1/second" }, /the default/],
      [{ ...body, extra: 1 }, /extra/],
    ] as const
  ) {
    const answer = await t.call("POST", "/admin/v1/limits", { body: wrong });
    assert.equal(answer.status, 400, JSON.stringify(wrong));
    assert.equal(answer.body.error.code, "invalid_request");
    assert.match(answer.body.error.message, message);
  }
  const missing = await t.call("POST", "/admin/v1/limits", { body: { ...body, subject_id: 999 } });
  assert.equal(missing.status, 404);
  assert.deepEqual(await t.store.listLimits(), []);
});

Deno.test("[admin] POST /admin/v1/keys/{id}/rotate moves the key's quota and what it used to the successor; the old key shares it; its limits cannot be set", async () => {
  await using t = await createAdminTest();
  const userId = await t.addUser("ann@example.org");
  const created = await t.call("POST", `/admin/v1/users/${userId}/keys`, { body: {} });
  const keyId = created.body.key.id;
  const quota = await t.call("POST", "/admin/v1/limits", {
    body: { applies_to: "key", subject_id: keyId, kind: "quota", limit: "3" },
  });
  assert.equal(quota.status, 200);
  const token = await t.login("ann@example.org", "correct horse", created.body.api_key);
  const spend = async (apiKey: string, bearer: string, n: number) => {
    const statuses = [];
    for (let i = 0; i < n; i++) statuses.push(await t.secureStatus(apiKey, bearer));
    return statuses;
  };
  assert.deepEqual(await spend(created.body.api_key, token, 2), [200, 200]);

  const rotated = await t.call("POST", `/admin/v1/keys/${keyId}/rotate`, {
    body: { grace: "1h" },
  });
  assert.equal(rotated.status, 201);
  const successorId = rotated.body.key.id;
  // The successor has the same quota, and what the old key used of it: a rotation refills
  // nothing. The old key's usage reads the same counter.
  for (const id of [successorId, keyId]) {
    const usage = await t.call("GET", `/admin/v1/keys/${id}/limits`, { token: t.readToken });
    assert.equal(usage.status, 200);
    // The old key's report names the key whose limits they are.
    assert.equal(usage.body.counts_against_key, id === keyId ? successorId : null);
    assert.deepEqual(
      usage.body.limits.map((u: { applies_to: string; limit: string; used: number }) => [
        u.applies_to,
        u.limit,
        u.used,
      ]),
      [["key", quota.body.limit, 2]],
    );
  }
  const successorToken = await t.login("ann@example.org", "correct horse", rotated.body.api_key);
  assert.deepEqual(await spend(rotated.body.api_key, successorToken, 2), [200, 429]);
  // The old key, in its grace, counts against the same quota: spent.
  assert.deepEqual(await spend(created.body.api_key, token, 1), [429]);
  // A limit of the rotated key is refused, naming its successor; nothing is stored.
  const refused = await t.call("POST", "/admin/v1/limits", {
    body: { applies_to: "key", subject_id: keyId, kind: "rate", limit: "1/second" },
  });
  assert.equal(refused.status, 409);
  assert.equal(refused.body.error.code, "conflict");
  assert.match(
    refused.body.error.message,
    new RegExp(
      `API key ${keyId} was rotated; its limits are its successor's \\(key ${successorId}\\)`,
    ),
  );
  // Stored: the one quota, now the successor's.
  assert.deepEqual(
    (await t.store.listLimits()).map((l) => [l.scope, l.subjectId, l.kind, l.max]),
    [["key", successorId, "quota", 3]],
  );
});
