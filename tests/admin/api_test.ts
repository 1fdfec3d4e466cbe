/**
 * The admin API through its real handler and a real store: routing (404, 405), the
 * console's headers, and hostile characters in what it stores and shows.
 * Every answer is also checked against the OpenAPI document (see tests/_helpers/admin_api.ts).
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { ADMIN_BASE, createAdminTest } from "../_helpers/admin_api.ts";

Deno.test("[admin] unknown paths are 404, wrong methods 405 with Allow, after sign-in", async () => {
  await using t = await createAdminTest();
  const missing = await t.admin(
    new Request(`${ADMIN_BASE}/admin/v1/nothing`, {
      headers: { authorization: `Bearer ${t.writeToken}` },
    }),
  );
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).error.code, "not_found");
  const wrong = await t.admin(
    new Request(`${ADMIN_BASE}/admin/v1/users`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${t.writeToken}` },
    }),
  );
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.get("allow"), "GET, POST");
  await wrong.body?.cancel();
  const anonymous = await t.admin(new Request(`${ADMIN_BASE}/admin/v1/nothing`));
  assert.equal(anonymous.status, 401, "the route list is not probed without a token");
  await anonymous.body?.cancel();
});

Deno.test("[admin] the console is served with a strict CSP, no cookie and no CORS", async () => {
  await using t = await createAdminTest();
  const page = await t.admin(
    new Request(`${ADMIN_BASE}/`, { headers: { origin: "https://evil.example" } }),
  );
  assert.equal(page.status, 200);
  assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
  const csp = page.headers.get("content-security-policy")!;
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.match(csp, /style-src 'self'(;|$)/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.equal(page.headers.get("x-frame-options"), "DENY");
  assert.equal(page.headers.get("set-cookie"), null);
  assert.equal(page.headers.get("access-control-allow-origin"), null);
  const html = await page.text();
  assert.match(html, /<script type="module" src="\/console\/app.js"><\/script>/);
  assert.equal(
    /<script>|<style|style="|onclick=|https?:\/\//.test(html),
    false,
    "nothing inline or external",
  );
  const script = await t.admin(new Request(`${ADMIN_BASE}/console/app.js`));
  assert.equal(script.headers.get("content-type"), "text/javascript; charset=utf-8");
  assert.match(await script.text(), /sessionStorage|readToken/);
  const notThere = await t.admin(new Request(`${ADMIN_BASE}/console/../../main.ts`));
  assert.equal(notThere.status, 404);
  await notThere.body?.cancel();
  const posted = await t.admin(new Request(`${ADMIN_BASE}/`, { method: "POST" }));
  assert.equal(posted.status, 405);
  await posted.body?.cancel();
});

Deno.test("[admin] control characters: 400 for new labels and e-mails, escaped when stored rows are read", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  for (const label of ["red\x1b[31m", "two\nlines", "c1\x9b2J", "del\x7f"]) {
    const answer = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label } });
    assert.equal(answer.status, 400, JSON.stringify(label));
    assert.equal(answer.body.error.code, "invalid_request");
    assert.match(answer.body.error.message, /^Invalid label: control, invisible and bidirectional/);
  }
  assert.equal(await t.store.countRows("api_keys"), 0);
  const added = await t.call("POST", "/admin/v1/users", {
    body: { email: "x\x9b@example.org", password: "x" },
  });
  assert.equal(added.status, 400);
  assert.equal(added.body.error.code, "invalid_request");
  assert.match(added.body.error.message, /^Invalid e-mail/);
  const renamed = await t.call("PUT", `/admin/v1/users/${id}/email`, {
    body: { email: "ann\x1b@example.org" },
  });
  assert.equal(renamed.status, 400);
  assert.equal((await t.store.findUserById(id))?.email, "ann@example.org");
  assert.equal(await t.store.countRows("users"), 1);

  // Rows stored before such characters were refused come back escaped, with the same value.
  const email = "old\x1b]0;x\x07\x9b@example.org";
  const label = "red\x1b[31m\nfake\x9b2J\x7f";
  const old = await t.store.insertUser(
    { email, passwordHash: "x", tokenTimeoutSeconds: null },
    { now: t.clock.now(), audit: undefined },
  );
  await t.store.insertApiKey({
    userId: old.id,
    keyHash: hashSecret("abcd1111-0000-4000-8000-000000000001"),
    prefix: "abcd1111",
    label,
    expiresAt: null,
    introspect: false,
  }, { now: t.clock.now(), audit: undefined });
  const response = await t.admin(
    new Request(`${ADMIN_BASE}/admin/v1/keys`, {
      headers: { authorization: `Bearer ${t.writeToken}` },
    }),
    { remoteAddr: { hostname: "192.0.2.10" } },
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  const text = await response.text();
  // deno-lint-ignore no-control-regex
  assert.doesNotMatch(text, /[\x00-\x1f\x7f-\x9f]/);
  assert.ok(text.includes(String.raw`red\u001b[31m\nfake\u009b2J\u007f`), text);
  assert.ok(text.includes(String.raw`old\u001b]0;x\u0007\u009b@example.org`), text);
  const [key] = JSON.parse(text).keys;
  assert.deepEqual([key.email, key.label], [email, label]);
});

Deno.test("[admin] invisible and bidirectional characters: 400 in e-mails, labels and targets; stored rows escaped", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  // The reproductions: both were 201.
  const added = await t.call("POST", "/admin/v1/users", {
    body: { email: "ann\u200b@example.org", password: "a good password" },
  });
  assert.equal(added.status, 400);
  assert.equal(added.body.error.code, "invalid_request");
  assert.match(added.body.error.message, /\(found U\+200B\)$/);
  const labelled = await t.call("POST", `/admin/v1/users/${id}/keys`, {
    body: { label: "billing\u202etxt.exe" },
  });
  assert.equal(labelled.status, 400);
  assert.match(labelled.body.error.message, /\(found U\+202E\)$/);
  // The whole class: zero-width, bidi controls and marks, other format and default-ignorable
  // characters, lone surrogates, separators and look-alike spaces.
  const refused = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
    "\u00ad",
    "\u180e",
    "\u3164",
    "\ufe0f",
    "\u{e0041}",
    "\ud800",
    "\u2028",
    "\u00a0",
    "\u2000",
    "\u200a",
    "\u3000",
    "\u202f",
    "\t",
  ];
  for (const c of refused) {
    const key = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label: `a${c}b` } });
    assert.equal(key.status, 400, JSON.stringify(c));
    const user = await t.call("POST", "/admin/v1/users", {
      body: { email: `x${c}y@example.org`, password: "a good password" },
    });
    assert.equal(user.status, 400, JSON.stringify(c));
    const renamed = await t.call("PUT", `/admin/v1/users/${id}/email`, {
      body: { email: `ann${c}@example.org` },
    });
    assert.equal(renamed.status, 400, JSON.stringify(c));
  }
  const cleared = await t.call("POST", "/admin/v1/throttle/clear", {
    body: { target: "192.0.2.1\u202e" },
  });
  assert.equal(cleared.status, 400);
  assert.equal(await t.store.countRows("api_keys"), 0);
  assert.equal(await t.store.countRows("users"), 1);
  // Plain spaces, accents and other scripts stay allowed.
  for (const label of ["billing key", "clé de facturation", "請求キー", "ключ"]) {
    const ok = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label } });
    assert.equal(ok.status, 201, label);
    assert.equal(ok.body.key.label, label);
  }

  // Rows stored before the rule come back escaped, with the same value.
  const email = "ann\u200b@example.org";
  const label = "billing\u202etxt.exe";
  const old = await t.store.insertUser(
    { email, passwordHash: "x", tokenTimeoutSeconds: null },
    {
      now: t.clock.now(),
      audit: { at: t.clock.now(), actor: "cli:x", action: "user.added", subject: `user:${email}` },
    },
  );
  await t.store.insertApiKey({
    userId: old.id,
    keyHash: hashSecret("abcd1111-0000-4000-8000-000000000002"),
    prefix: "abcd1111",
    label,
    expiresAt: null,
    introspect: false,
  }, { now: t.clock.now(), audit: undefined });
  for (const path of ["/admin/v1/keys?limit=200", "/admin/v1/audit", "/admin/v1/users"]) {
    const response = await t.admin(
      new Request(`${ADMIN_BASE}${path}`, {
        headers: { authorization: `Bearer ${t.writeToken}` },
      }),
      { remoteAddr: { hostname: "192.0.2.10" } },
    );
    assert.equal(response.status, 200, path);
    const text = await response.text();
    assert.doesNotMatch(text, /[\u200b\u202e]/, path);
    assert.ok(text.includes(String.raw`ann\u200b@example.org`), path);
    if (path.includes("keys")) {
      assert.ok(text.includes(String.raw`billing\u202etxt.exe`), text);
      assert.ok(JSON.parse(text).keys.some((k: { label: string }) => k.label === label));
    }
  }
});
