/**
 * The console's "Portal sign-ups" page in Chromium (console_browser.ts): an operator approves
 * one waiting account and refuses another, checked in the store and the audit log.
 */
import assert from "node:assert/strict";
import type { ConsoleRun } from "./_console_rig.ts";

export async function runPortalSteps(run: ConsoleRun): Promise<void> {
  const { t, page, shots } = run;
  const { store, clock } = run.rig;

  await t.step("approve and refuse portal sign-ups that wait for an operator", async () => {
    const waiting = [];
    for (const address of ["pat@example.org", "quinn@example.org", "rae@example.org"]) {
      waiting.push(
        await store.insertPortalUser(
          { email: address, passwordHash: "x", tokenTimeoutSeconds: null },
          {
            now: clock.now(),
            state: "pending_approval",
            mail: { recipient: address, subject: "Verify", text: "code" },
            audit: undefined,
          },
        ),
      );
    }
    const [pat, quinn] = waiting;
    await page.getByRole("link", { name: "Portal sign-ups" }).click();
    await page.getByRole("heading", { name: "Portal sign-ups" }).waitFor();
    await page.getByRole("cell", { name: "rae@example.org", exact: true }).waitFor();
    await page.screenshot({ path: `${shots}/portal-approval.png` });
    await page.getByRole("button", { name: "Approve pat@example.org" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Approve" }).click();
    await page.getByRole("status").getByText("pat@example.org approved").waitFor();
    await page.getByRole("button", { name: "Refuse quinn@example.org" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByText(/The account is deleted/).waitFor();
    await dialog.getByRole("button", { name: "Refuse" }).click();
    await page.getByRole("status").getByText("quinn@example.org refused").waitFor();
    await page.getByRole("cell", { name: "quinn@example.org", exact: true }).waitFor({
      state: "detached",
    });
    assert.deepEqual(await page.locator("tbody tr td:first-child").allInnerTexts(), [
      "rae@example.org",
    ]);
    assert.equal((await store.findPortalAccount(pat.id))?.state, "active");
    assert.equal((await store.findUserById(pat.id))?.disabled, false);
    assert.equal(await store.findUserById(quinn.id), undefined);
    // The changes, newest first (the console's reads may have added an operator.bulk_read).
    const audit = (await store.searchAudit({ limit: 5, actor: "operator:ann" }))
      .filter((row) => row.action !== "operator.bulk_read");
    assert.deepEqual(audit.slice(0, 2).map((row) => row.action), [
      "portal.refused",
      "portal.approved",
    ]);
  });
}
