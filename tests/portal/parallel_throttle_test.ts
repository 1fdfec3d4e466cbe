/**
 * The portal's throttles under parallel requests (issue 25, review 3): requests in flight
 * together all pass the throttle's first check, so each is checked again after its slow
 * password check, and one blocked by then gets the throttle's answer whether its password was
 * right or wrong. Real handler, test store (both backends), real SMTP server.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readCode } from "./_smtp.ts";
import { type PortalRig, startPortalRig } from "./_portal.ts";

const PASSWORD = "correct horse battery";

async function activeAccount(rig: PortalRig, email: string): Promise<void> {
  let response = await rig.api("POST", "/signup", { email, password: PASSWORD });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  response = await rig.api("POST", "/verify", { email, code, password: PASSWORD });
  assert.equal(response.status, 200);
  await response.body?.cancel();
}

/** Status counts of `statuses`, e.g. `{ 401: 10, 429: 50 }`. */
function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

Deno.test("[e2e] 60 parallel sign-ins: the guesses are blocked, and so is the right password after them", async () => {
  await using rig = await startPortalRig();
  const email = "target@example.org";
  await activeAccount(rig, email);
  const answers = await Promise.all(
    Array.from({ length: 60 }, async (_, i) => {
      const response = await rig.api("POST", "/signin", {
        email,
        password: i === 59 ? PASSWORD : `wrong guess ${i} xx`,
      });
      assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
      return {
        status: response.status,
        body: await response.json(),
        cookie: response.headers.get("set-cookie"),
        retryAfter: response.headers.get("retry-after"),
      };
    }),
  );
  const counts = tally(answers.map((answer) => answer.status));
  // Before the fix every request was password-checked and answered: 59 × 401 and one 200.
  assert.ok((counts[429] ?? 0) > 0, `some are throttled: ${JSON.stringify(counts)}`);
  // The pair's threshold is 10; requests finishing together may each count one more.
  assert.ok((counts[401] ?? 0) < 30, `the guesses stop early: ${JSON.stringify(counts)}`);
  const last = answers[59];
  assert.equal(last.status, 429, `the right password, last, is blocked: ${JSON.stringify(counts)}`);
  assert.equal(last.cookie, null, "no session cookie");
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
