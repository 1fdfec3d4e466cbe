/**
 * The console's pages in Chromium (console_browser.ts): the dashboard's charts, every key,
 * the audit log's filters, deleting a user, the throttle, limits, escaped stored text and
 * paging.
 */
import assert from "node:assert/strict";
import { AUDIT_ACTIONS } from "../../src/auth/audit.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import type { ConsoleRun } from "./_console_rig.ts";

export async function runPageSteps(run: ConsoleRun): Promise<void> {
  const { t } = run;
  await t.step(
    "the dashboard charts the server's history, then live samples",
    () => chartDashboard(run),
  );
  await t.step(
    "the keys page lists every key with its owner, and finds unused ones",
    () => listKeys(run),
  );
  await t.step("filter the audit log by action", () => filterAuditLog(run));
  await t.step("delete a user after confirming", () => deleteUser(run));
  await t.step("the throttle page lists the failed sign-in's counter", () => showThrottle(run));
  await t.step(
    "set a key's rate on the limits page, see what is left, remove it; a rotated key's points on",
    () => setAndRemoveLimit(run),
  );
  await t.step(
    "stored invisible and bidirectional characters are shown escaped",
    () => escapeStoredText(run),
  );
  await t.step(
    "a list longer than a page goes on with Next page and back",
    () => pageThroughUsers(run),
  );
}

/** The dashboard charts the server's history, then live samples. */
async function chartDashboard(run: ConsoleRun): Promise<void> {
  const { page, shots, rig, email, apiKey } = run;
  const { api, history, login } = run.rig;
  // Four minutes of history: the real counters after 1, 2, 3 and 4 logins and a
  // failure each minute, sampled as the server's minute timer would.
  for (let minute = 1; minute <= 4; minute++) {
    for (let i = 0; i < minute; i++) await login(email, "correct horse", apiKey);
    await fetch(`${api.origin}/api/userservice/tokens`, {
      method: "POST",
      client: api.client,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        auth_request: { user: { email, password: "wrong" }, api_key: apiKey },
      }),
    }).then((response) => response.body?.cancel());
    await history.sampleNow();
    rig.sampledAt += 60_000;
  }
  await page.getByRole("link", { name: "Dashboard" }).click();
  const logins = page.locator("figure.chart", { hasText: /^Logins per minute/ });
  await logins.locator("polyline").waitFor(); // at once, from the history
  assert.equal(await page.locator("figure.chart").count(), 4);
  assert.match(
    await logins.locator("svg").getAttribute("aria-label") ?? "",
    /Logins per minute: from 2 to \d+/,
  );
  await page.waitForTimeout(5500); // one live sample
  await page.screenshot({ path: `${shots}/dashboard.png` });
}

/** The keys page lists every key with its owner, and finds unused ones. */
async function listKeys(run: ConsoleRun): Promise<void> {
  const { page, shots } = run;
  await page.getByRole("link", { name: "API keys" }).click();
  await page.getByRole("heading", { name: "API keys" }).waitFor();
  const rows = page.locator("tbody tr[data-key-id]");
  await rows.first().waitFor();
  assert.equal(await rows.count(), 2);
  assert.match(await rows.first().innerText(), /carol@example\.org/);
  await page.screenshot({ path: `${shots}/keys.png` });
  await page.getByLabel("Not used for").selectOption("7d");
  await page.getByRole("button", { name: "Show" }).click();
  await page.waitForURL(/unused=7d/);
  await page.getByRole("cell", { name: "None" }).waitFor(); // both were used or made today
}

/** Filter the audit log by action. */
async function filterAuditLog(run: ConsoleRun): Promise<void> {
  const { page, shots } = run;
  await page.getByRole("link", { name: "Audit log" }).click();
  await page.getByLabel("Action").selectOption("key.rotated");
  // selectOption waited for the page; its list is the server's actions (src/auth/audit.ts,
  // through the OpenAPI document).
  assert.deepEqual(
    await page.getByLabel("Action").locator("option").evaluateAll((options) =>
      options.map((option) => (option as unknown as { value: string }).value)
    ),
    ["", ...AUDIT_ACTIONS],
  );
  await page.getByRole("button", { name: "Filter" }).click();
  await page.waitForURL(/action=key.rotated/);
  const rows = page.locator("tbody tr");
  await rows.first().getByText("key.rotated").waitFor();
  assert.equal(await rows.count(), 1);
  assert.match(await rows.first().innerText(), /operator:ann/);
  await page.getByLabel("Action").selectOption("");
  await page.getByLabel("Actor").fill("operator:ann");
  await page.getByRole("button", { name: "Filter" }).click();
  await page.waitForURL(/actor=operator/);
  await page.locator("tbody tr").nth(3).waitFor();
  const actors = await page.locator("tbody tr td:nth-child(2)").allInnerTexts();
  assert.ok(
    actors.length >= 4 && actors.every((actor) => actor === "operator:ann"),
    String(actors),
  );
  await page.screenshot({ path: `${shots}/audit.png` });
}

/** Delete a user after confirming. */
async function deleteUser(run: ConsoleRun): Promise<void> {
  const { page } = run;
  const { store, admin } = run.rig;
  await page.goto(`${admin.origin}/#/users`);
  await page.getByRole("link", { name: "erin@example.org" }).click();
  await page.getByRole("button", { name: "Delete user" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.getByText(/cannot be undone/).waitFor();
  await dialog.getByRole("button", { name: "Delete user" }).click();
  await page.getByRole("status").getByText("Deleted erin@example.org", { exact: false })
    .waitFor();
  await page.waitForURL(/#\/users$/);
  assert.equal(await store.findUserByEmail("erin@example.org"), undefined);
}

/** The throttle page lists the failed sign-in's counter. */
async function showThrottle(run: ConsoleRun): Promise<void> {
  const { page, shots } = run;
  await page.getByRole("link", { name: "Throttle" }).click();
  await page.getByRole("cell", { name: "admin:127.0.0.1" }).waitFor();
  await page.getByRole("heading", { name: "Clear counters" }).waitFor();
  await page.screenshot({ path: `${shots}/throttle.png` });
}

/** Set a key's rate on the limits page, see what is left, remove it; a rotated key's points on. */
async function setAndRemoveLimit(run: ConsoleRun): Promise<void> {
  const { page, shots } = run;
  const { store } = run.rig;
  // A key that was not rotated: a rotated key's limits are its successor's, and cannot be set.
  const [key] = (await store.listApiKeys()).filter((k) =>
    k.revokedAt === null && k.replacedBy === null
  );
  await page.getByRole("link", { name: "Limits" }).click();
  await page.getByRole("heading", { name: "Set a limit" }).waitFor();
  await page.getByLabel("Applies to").selectOption("key");
  await page.getByLabel("Key or user id").fill(String(key.id));
  await page.getByLabel("Kind").selectOption("rate");
  await page.getByLabel("Limit", { exact: true }).fill("5/minute");
  await page.getByRole("button", { name: "Set limit" }).click();
  await page.getByRole("status").getByText(`The rate of key ${key.id} is now 5/minute`)
    .waitFor();
  await page.getByRole("cell", { name: "5/minute", exact: true }).waitFor();
  const [stored] = await store.listLimits();
  assert.deepEqual([stored.scope, stored.subjectId, stored.max, stored.period], [
    "key",
    key.id,
    5,
    "minute",
  ]);
  await page.getByLabel("Key id").fill(String(key.id));
  await page.getByRole("button", { name: "Show its limits" }).click();
  const usage = page.locator("table", { hasText: `In force for key ${key.id}` });
  await usage.getByRole("cell", { name: "5", exact: true }).first().waitFor();
  await page.screenshot({ path: `${shots}/limits.png`, fullPage: true });
  // A rotated key's limits are its successor's: its page says so and links to that key's.
  const rotated = (await store.listApiKeys()).find((k) => k.replacedBy !== null);
  assert.ok(rotated, "the rotate step left a rotated key");
  await page.getByLabel("Key id").fill(String(rotated.id));
  await page.getByRole("button", { name: "Show its limits" }).click();
  await page.getByText(`Key ${rotated.id} was rotated: the rotation moved its limits`).waitFor();
  await page.getByRole("link", { name: `key ${rotated.replacedBy}`, exact: true }).click();
  await page.waitForURL(new RegExp(`#/limits\\?key=${rotated.replacedBy}$`));
  await page.locator("table", { hasText: `In force for key ${rotated.replacedBy}` }).waitFor();
  assert.equal(await page.getByText(/was rotated: the rotation/).count(), 0);
  await page.getByRole("button", { name: /Remove the rate 5\/minute/ }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Remove limit" }).click();
  await page.getByRole("status").getByText(`Removed the rate of key ${key.id}`).waitFor();
  assert.deepEqual(await store.listLimits(), []);
  const audit = await store.searchAudit({ limit: 5, actor: "operator:ann" });
  assert.deepEqual(audit.slice(0, 2).map((row) => row.action), [
    "limit.removed",
    "limit.set",
  ]);
}

/** Stored invisible and bidirectional characters are shown escaped. */
async function escapeStoredText(run: ConsoleRun): Promise<void> {
  const { page } = run;
  const { store, clock, admin } = run.rig;
  const user = await store.insertUser(
    { email: "zed\u200b@example.org", passwordHash: "x", tokenTimeoutSeconds: null },
    { now: clock.now(), audit: undefined },
  );
  await store.insertApiKey({
    userId: user.id,
    keyHash: hashSecret("console-rlo-key"),
    prefix: "rlo12345",
    label: "billing\u202etxt.exe",
    expiresAt: null,
    introspect: false,
  }, { now: clock.now(), audit: undefined });
  await page.goto(`${admin.origin}/#/users/${user.id}`);
  await page.getByText(String.raw`billing\u202etxt.exe`).waitFor();
  const text = await page.locator("main").innerText();
  assert.doesNotMatch(text, /[\u200b\u202e]/);
  assert.ok(text.includes(String.raw`zed\u200b@example.org`), text);
  await page.goto(`${admin.origin}/#/keys`);
  await page.getByText(String.raw`billing\u202etxt.exe`).waitFor();
}

/** A list longer than a page goes on with Next page and back. */
async function pageThroughUsers(run: ConsoleRun): Promise<void> {
  const { page } = run;
  const { store, clock, admin } = run.rig;
  for (let i = 0; i < 26; i++) {
    await store.insertUser(
      {
        email: `page${String(i).padStart(2, "0")}@example.org`,
        passwordHash: "x",
        tokenTimeoutSeconds: null,
      },
      { now: clock.now(), audit: undefined },
    );
  }
  await page.goto(`${admin.origin}/#/users`);
  await page.getByRole("link", { name: "Next page" }).click();
  await page.waitForURL(/cursor=/);
  await page.getByRole("link", { name: "First page" }).waitFor();
  const second = await page.locator("tbody tr td:first-child").allInnerTexts();
  assert.ok(second.length >= 1 && second.length <= 25, String(second));
  assert.ok(second.every((email) => email > "page"), String(second));
  await page.getByRole("link", { name: "First page" }).click();
  await page.waitForURL(/#\/users$/);
}
