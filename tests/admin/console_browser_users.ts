/**
 * The console's first steps in Chromium (console_browser.ts): an operator signs in with the
 * keyboard, creates a user and a key (shown once), rotates, disables and enables it, changes
 * the token lifetime and revokes a token, each checked in the store or through the API.
 */
import assert from "node:assert/strict";
import type { ConsoleRun } from "./_console_rig.ts";

export async function runUserSteps(run: ConsoleRun): Promise<void> {
  const { t } = run;
  /** The token the rotate step gets with the new key, for the steps after it. */
  const session = { token: "" };
  await t.step("sign in with the keyboard; a wrong token is refused", () => signIn(run));
  await t.step("create a user from the users page", () => createUser(run));
  await t.step(
    "create a key: shown once with a copy button, then only its prefix",
    () => createKey(run),
  );
  await t.step(
    "rotate the key after confirming; the successor is shown once",
    () => rotateKey(run, session),
  );
  await t.step(
    "disable and enable a key; change the token lifetime",
    () => disableAndEnableKey(run, session),
  );
  await t.step(
    "revoke a token: the next secure request with it is refused",
    () => revokeToken(run, session),
  );
}

/** Sign in with the keyboard; a wrong token is refused. */
async function signIn(run: ConsoleRun): Promise<void> {
  const { page, errors, shots } = run;
  const { admin, writeToken, browser } = run.rig;
  await page.goto(`${admin.origin}/`);
  const token = page.getByLabel("Operator token");
  await token.waitFor();
  assert.equal(await page.evaluate("document.activeElement.name"), "token", "focused");
  assert.equal(await page.getByRole("navigation").count(), 0, "no sections before sign-in");
  assert.equal(await page.getByRole("button", { name: "Sign out" }).count(), 0);
  await page.screenshot({ path: `${shots}/sign-in.png` });
  await page.keyboard.type("kgo_" + "x".repeat(40));
  await page.keyboard.press("Enter");
  await page.getByRole("alert").getByText("Missing or invalid operator token").waitFor();
  // That refusal is the one error the browser may log (a 401 resource); none after it.
  assert.deepEqual(errors.map((e) => e.includes("status of 401")), [true]);
  errors.length = 0;
  await token.fill(writeToken);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Dashboard" }).waitFor();
  assert.match(await page.locator("#who").innerText(), /ann \(write\)/);
  assert.equal(
    await page.evaluate(() => sessionStorage.getItem("keygate.operatorToken")),
    writeToken,
  );
  const cookies = await browser.context.cookies();
  assert.deepEqual(cookies, [], "no cookie: the token travels only in a header");
}

/** Create a user from the users page. */
async function createUser(run: ConsoleRun): Promise<void> {
  const { page, shots } = run;
  const { store, admin, addUser } = run.rig;
  await page.getByRole("link", { name: "Users" }).click();
  await page.getByRole("heading", { name: "Add a user" }).waitFor();
  const email = "carol@example.org";
  run.email = email;
  await page.getByLabel("E-mail", { exact: true }).fill(email);
  await page.getByLabel("Password").fill("correct horse");
  await page.getByLabel("Token lifetime").fill("2h");
  await page.getByRole("button", { name: "Add user" }).click();
  await page.getByRole("heading", { name: email }).waitFor();
  const stored = await store.findUserByEmail(email);
  assert.equal(stored?.tokenTimeoutSeconds, 7200);
  for (const other of ["dave@example.org", "erin@example.org"]) {
    await addUser(other);
  }
  await page.goto(`${admin.origin}/#/users`);
  await page.getByRole("link", { name: email }).waitFor();
  await page.screenshot({ path: `${shots}/users.png` });
}

/** Create a key: shown once with a copy button, then only its prefix. */
async function createKey(run: ConsoleRun): Promise<void> {
  const { page, shots, email } = run;
  await page.getByRole("link", { name: email }).click();
  await page.getByLabel("Label").fill("billing app");
  await page.getByRole("button", { name: "Create key" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.getByRole("heading", { name: /New key/ }).waitFor();
  const apiKey = await dialog.locator("#secret-value").innerText();
  run.apiKey = apiKey;
  assert.match(
    apiKey,
    /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  );
  await dialog.getByRole("button", { name: "Copy" }).click();
  await dialog.getByText("Copied").waitFor();
  assert.equal(await page.evaluate("navigator.clipboard.readText()"), apiKey);
  await page.screenshot({ path: `${shots}/key-created.png` });
  await dialog.getByRole("button", { name: "I have stored it" }).click();
  await page.getByRole("cell", { name: `${apiKey.slice(0, 8)}…` }).waitFor();
  assert.equal(
    (await page.content()).includes(apiKey),
    false,
    "the key is gone from the page",
  );
}

/** Rotate the key after confirming; the successor is shown once. */
async function rotateKey(run: ConsoleRun, session: { token: string }): Promise<void> {
  const { page, shots, email, apiKey } = run;
  const { store, keyUsage, login, secureStatus } = run.rig;
  const token = await login(email, "correct horse", apiKey);
  session.token = token;
  assert.equal(await secureStatus(apiKey, token), 200);
  assert.equal(await keyUsage.flush(), 1);
  await page.reload();
  const used = page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` });
  await used.getByText("from 127.0.0.1").waitFor(); // the key's last use
  const row = page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` });
  await row.getByRole("button", { name: /Rotate key/ }).click();
  const dialog = page.getByRole("dialog");
  await dialog.getByLabel("Grace period").fill("1h");
  await dialog.getByRole("button", { name: "Rotate key" }).click();
  await page.getByRole("dialog").getByRole("heading", { name: /New key/ }).waitFor();
  const successor = await page.locator("#secret-value").innerText();
  assert.notEqual(successor, apiKey);
  await page.getByRole("button", { name: "I have stored it" }).click();
  await page.getByRole("cell", { name: `${successor.slice(0, 8)}…` }).waitFor();
  const [old] = await store.listApiKeys();
  assert.notEqual(old.replacedBy, null);
  assert.equal(await secureStatus(apiKey, token), 200, "the old key works during the grace");
  await page.screenshot({ path: `${shots}/user.png`, fullPage: true });
}

/** Disable and enable a key; change the token lifetime. */
async function disableAndEnableKey(run: ConsoleRun, session: { token: string }): Promise<void> {
  const { page, email, apiKey } = run;
  const { token } = session;
  const { store, secureStatus } = run.rig;
  const row = page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` });
  await row.getByRole("button", { name: /Disable key/ }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Disable key" }).click();
  await page.getByRole("status").getByText(/is disabled/).waitFor();
  assert.equal(await secureStatus(apiKey, token), 401, "a disabled key's token is refused");
  await page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` })
    .getByRole("button", { name: /Enable key/ }).click();
  await page.getByRole("status").getByText(/is active/).waitFor();
  // The page is drawn again after the change: wait for it before typing into it.
  await page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` })
    .getByRole("button", { name: /Disable key/ }).waitFor();
  assert.equal(await secureStatus(apiKey, token), 200);
  await page.getByLabel("Lifetime of new tokens").fill("45m");
  await page.getByRole("button", { name: "Save lifetime" }).click();
  await page.getByRole("status").getByText("Token lifetime is now 45m").waitFor();
  assert.equal((await store.findUserByEmail(email))?.tokenTimeoutSeconds, 2700);
}

/** Revoke a token: the next secure request with it is refused. */
async function revokeToken(run: ConsoleRun, session: { token: string }): Promise<void> {
  const { page, shots, apiKey } = run;
  const { token } = session;
  const { secureStatus } = run.rig;
  const row = page.locator("tr[data-token-id]").first();
  await row.getByRole("button", { name: /Revoke token/ }).click();
  const dialog = page.getByRole("dialog");
  await dialog.getByText(/Revoke token \d+\?/).waitFor();
  await page.screenshot({ path: `${shots}/confirm.png` });
  await dialog.getByRole("button", { name: "Revoke token" }).click();
  await page.getByRole("status").getByText(/Token \d+ revoked/).waitFor();
  assert.equal(await secureStatus(apiKey, token), 401);
}
