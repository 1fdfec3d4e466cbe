/**
 * The console's last steps in Chromium (console_browser.ts): no page logged an error, the CSP
 * refuses an injected script, and a read-only operator sees no write button and gets 403.
 */
import assert from "node:assert/strict";
import type { ConsoleRun } from "./_console_rig.ts";

export async function runSafetySteps(run: ConsoleRun): Promise<void> {
  const { t, page, errors, shots } = run;
  const { store, admin, readToken } = run.rig;
  const { email } = run;

  await t.step("no page logged an error or a CSP violation (Chromium logs those)", () => {
    assert.deepEqual(errors, []);
  });

  await t.step(
    "the CSP refuses an injected inline script, and the watch above sees it",
    async () => {
      await page.evaluate(
        "document.body.append(Object.assign(document.createElement('script'), { textContent: 'window.injected = 1' }))",
      );
      assert.equal(await page.evaluate("window.injected"), undefined);
      assert.ok(errors.some((e) => e.includes("Content Security Policy")), String(errors));
      errors.length = 0;
    },
  );

  await t.step(
    "a read-only operator sees no write button and gets 403 from the API",
    async () => {
      await page.getByRole("button", { name: "Sign out" }).click();
      await page.getByLabel("Operator token").fill(readToken);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("heading", { name: "Dashboard" }).waitFor();
      await page.goto(`${admin.origin}/#/users`);
      await page.getByRole("link", { name: email }).click();
      await page.getByRole("heading", { name: "API keys" }).waitFor();
      for (
        const name of [
          "Create key",
          "Rotate",
          "Revoke",
          "Disable",
          "Enable",
          "Disable user",
          "Delete user",
          "Revoke all tokens",
          "Save lifetime",
          "Set password",
        ]
      ) {
        assert.equal(await page.getByRole("button", { name }).count(), 0, name);
      }
      await page.screenshot({ path: `${shots}/read-only.png` });
      const status = await page.evaluate(async () => {
        const response = await fetch("/admin/v1/users", {
          method: "POST",
          headers: {
            authorization: `Bearer ${sessionStorage.getItem("keygate.operatorToken")}`,
            "content-type": "application/json",
          },
          body: JSON.stringify({ email: "mallory@example.org", password: "x" }),
        });
        return [response.status, (await response.json()).error.code];
      });
      assert.deepEqual(status, [403, "forbidden"]);
      assert.equal(await store.findUserByEmail("mallory@example.org"), undefined);
      await page.goto(`${admin.origin}/#/users`);
      assert.equal(await page.getByRole("heading", { name: "Add a user" }).count(), 0);
      await page.goto(`${admin.origin}/#/portal`);
      await page.getByRole("cell", { name: "rae@example.org", exact: true }).waitFor();
      assert.equal(await page.getByRole("button", { name: /Approve|Refuse/ }).count(), 0);
    },
  );
}
