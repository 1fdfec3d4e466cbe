/**
 * The portal's throttles under parallel requests (issue 25, review 3): requests in flight
 * together all pass the throttle's first check, so each is checked again after its slow
 * password check, and one blocked by then gets the throttle's answer whether its password was
 * right or wrong; while the password pool would refuse a check, the request is refused (503)
 * before any work. Real handler, test store (both backends), real SMTP server.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hasher, startPortalRig, verifiedAccount, withRefusal } from "./_portal.ts";
import { PASSWORD } from "./_portal_answers.ts";

/**
 * The rigs' hasher, but once armed, a check of {@link PASSWORD} waits until released: so the
 * right password passes the throttle's first check, and the guesses are counted while it is
 * in the slow check, whatever order the requests reach the handler in.
 */
function holdingHasher() {
  let armed = false;
  const reached = Promise.withResolvers<void>();
  const released = Promise.withResolvers<void>();
  return {
    hasher: {
      ...hasher,
      async verify(hash: string | undefined, password: string, signal?: AbortSignal) {
        if (armed && password === PASSWORD) {
          reached.resolve();
          await released.promise;
        }
        return await hasher.verify(hash, password, signal);
      },
    },
    arm: () => armed = true,
    reached: reached.promise,
    release: () => released.resolve(),
  };
}

/** Status counts of `statuses`, e.g. `{ 401: 10, 429: 50 }`. */
function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

Deno.test("[e2e] 60 parallel sign-ins: the guesses are blocked, and so is the right password after them", async () => {
  const hold = holdingHasher();
  await using rig = await startPortalRig({ hasher: hold.hasher });
  const email = "target@example.org";
  await verifiedAccount(rig, email);
  const signIn = async (password: string) => {
    const response = await rig.api("POST", "/signin", { email, password });
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    return {
      status: response.status,
      body: await response.json(),
      cookie: response.headers.get("set-cookie"),
      retryAfter: response.headers.get("retry-after"),
    };
  };
  hold.arm();
  // The right password first: it passes the first check and waits in the slow one.
  const right = signIn(PASSWORD);
  await hold.reached;
  const guesses = await Promise.all(
    Array.from({ length: 59 }, (_, i) => signIn(`wrong guess ${i} xx`)),
  );
  hold.release();
  const answers = [...guesses, await right];
  const counts = tally(answers.map((answer) => answer.status));
  // Before the fix every request was password-checked and answered: 59 × 401 and one 200.
  assert.ok((counts[429] ?? 0) > 0, `some are throttled: ${JSON.stringify(counts)}`);
  // The pair's threshold is 10; requests finishing together may each count one more.
  assert.ok((counts[401] ?? 0) < 30, `the guesses stop early: ${JSON.stringify(counts)}`);
  const last = answers[59];
  // Blocked by the check after its password check: the guesses were counted meanwhile.
  assert.equal(last.status, 429, `the right password is blocked: ${JSON.stringify(counts)}`);
  assert.equal(last.cookie, null, "no session cookie");
  for (const answer of answers.filter((answer) => answer.status === 503)) {
    assert.equal(answer.body.error.code, "service_busy");
  }
  for (const answer of answers.filter((answer) => answer.status === 429)) {
    assert.equal(answer.body.error.code, "too_many_attempts");
    assert.match(answer.retryAfter ?? "", /^[1-9][0-9]*$/);
  }
  for (const answer of answers.filter((answer) => answer.status === 401)) {
    assert.equal(answer.body.error.code, "invalid_credentials");
  }
  const opened = (await rig.app.store.listAudit()).filter((row) =>
    row.action === "portal.signed_in"
  );
  assert.equal(opened.length, 1, "only the verification's session was opened");
});

Deno.test("[e2e] 30 parallel current-password checks: the guesses are blocked, and so is the right one after them", async () => {
  const hold = holdingHasher();
  await using rig = await startPortalRig({ hasher: hold.hasher });
  const email = "owner@example.org";
  await verifiedAccount(rig, email);
  const browser = rig.browser();
  await browser.signIn(email, PASSWORD);
  const before = (await rig.app.store.findUserByEmail(email))!.passwordHash;
  const change = async (current: string) => {
    const response = await browser.call("POST", "/password", {
      current_password: current,
      password: "a brand new secret 99",
    });
    const body = await response.json();
    if (response.status === 429) assert.equal(body.error.code, "too_many_attempts");
    if (response.status === 401) assert.equal(body.error.code, "invalid_credentials");
    if (response.status === 503) assert.equal(body.error.code, "service_busy");
    return response.status;
  };
  hold.arm();
  const right = change(PASSWORD);
  await hold.reached;
  const guesses = await Promise.all(
    Array.from({ length: 29 }, (_, i) => change(`wrong guess ${i} xx`)),
  );
  hold.release();
  const statuses = [...guesses, await right];
  const counts = tally(statuses);
  // Before the fix: 29 × 401, and the right one changed the password (200).
  assert.ok((counts[429] ?? 0) > 0, `some are throttled: ${JSON.stringify(counts)}`);
  assert.ok((counts[401] ?? 0) < 20, `the guesses stop early: ${JSON.stringify(counts)}`);
  assert.equal(statuses[29], 429, `the right one is blocked: ${JSON.stringify(counts)}`);
  assert.equal((await rig.app.store.findUserByEmail(email))!.passwordHash, before, "unchanged");
});

Deno.test("[e2e] 40 parallel wrong verification codes from one network: the late ones are blocked", async () => {
  await using rig = await startPortalRig();
  const email = "pending@example.org";
  const response = await rig.api("POST", "/signup", { email, password: PASSWORD });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  await rig.smtp.waitFor(email, "Verify");
  const statuses = await Promise.all(
    Array.from({ length: 40 }, async (_, i) => {
      const answer = await rig.api("POST", "/verify", {
        email,
        code: "AAAAA-AAAAA",
        password: `${PASSWORD} ${i}`,
      });
      const body = await answer.json();
      if (answer.status === 429) assert.equal(body.error.code, "too_many_attempts");
      if (answer.status === 400) assert.equal(body.error.code, "invalid_request");
      return answer.status;
    }),
  );
  const counts = tally(statuses);
  // Before the fix all 40 were checked against the pending password: 40 × 400.
  assert.ok((counts[429] ?? 0) > 0, `some are throttled: ${JSON.stringify(counts)}`);
  assert.ok((counts[400] ?? 0) < 25, `the guesses stop early: ${JSON.stringify(counts)}`);
});

Deno.test("[e2e] while the password hasher is overloaded, the portal's password work answers 503 before any work", async () => {
  let busy = false;
  await using rig = await startPortalRig({ hasher: withRefusal(() => busy ? 7 : undefined) });
  const email = "busy@example.org";
  await verifiedAccount(rig, email);
  const browser = rig.browser();
  await browser.signIn(email, PASSWORD);
  const audited = (await rig.app.store.listAudit()).length;
  const counters = (await rig.app.store.listLoginFailures(rig.app.clock.now())).length;
  busy = true;
  const refused = [
    await rig.api("POST", "/signin", { email, password: PASSWORD }),
    await rig.api("POST", "/signin", { email, password: "wrong guess 1 xx" }),
    await rig.api("POST", "/verify", { email, code: "AAAAA-AAAAA", password: PASSWORD }),
    await rig.api("POST", "/signup", { email: "new@example.org", password: PASSWORD }),
    await rig.api("POST", "/reset", {
      email,
      code: "AAAAA-AAAAA",
      password: "a brand new secret 99",
    }),
    await browser.call("POST", "/password", {
      current_password: PASSWORD,
      password: "a brand new secret 99",
    }),
  ];
  for (const response of refused) {
    assert.equal(response.status, 503);
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal(response.headers.get("retry-after"), "7");
    assert.equal(response.headers.get("set-cookie"), null);
    assert.equal((await response.json()).error.code, "service_busy");
  }
  assert.equal((await rig.app.store.listAudit()).length, audited, "nothing audited");
  assert.equal(
    (await rig.app.store.listLoginFailures(rig.app.clock.now())).length,
    counters,
    "nothing counted",
  );
  busy = false;
  const response = await rig.api("POST", "/signin", { email, password: PASSWORD });
  assert.equal(response.status, 200);
  await response.body?.cancel();
});
