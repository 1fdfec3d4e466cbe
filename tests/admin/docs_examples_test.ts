/**
 * Every curl example of docs/admin-api.md's "Endpoints" works: the `sh`
 * blocks there are run in order with bash against the real server (a child
 * process with --admin on), as an operator would paste them, with `KG`, `CA`
 * and `OP` set as the "Conventions" section says. curl fails on any 4xx or
 * 5xx, so an example whose path, method or body is wrong fails the test.
 */
import assert from "node:assert/strict";
import { createOperator } from "../../src/auth/operators.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { startServerProcess } from "../_helpers/server_process.ts";

/** The blocks marked `sh tested-by:` this file after the heading `## Endpoints`, in order. */
function endpointExamples(markdown: string): string[] {
  const section = markdown.slice(markdown.indexOf("\n## Endpoints"));
  const end = section.indexOf("\n## ", 5);
  return [
    ...section.slice(0, end === -1 ? undefined : end).matchAll(
      /^```sh tested-by: tests\/admin\/docs_examples_test\.ts\n([\s\S]*?)^```$/gm,
    ),
  ]
    .map((match) => match[1]);
}

/** Two portal sign-ups that wait for an operator, as the portal writes them (users 2 and 3). */
async function seedPendingAccounts(path: string): Promise<void> {
  const store = openSqliteStore(path);
  try {
    for (const email of ["dev@example.com", "spam@example.net"]) {
      await store.insertPortalUser({ email, passwordHash: "x", tokenTimeoutSeconds: null }, {
        now: systemClock.now(),
        state: "pending_approval",
        mail: { recipient: email, subject: "Verify", text: "…" },
        audit: undefined,
      });
    }
  } finally {
    await store.closeStore();
  }
}

Deno.test("[server] the admin listener is not the API port; the curl examples of docs/admin-api.md work", async () => {
  const markdown = await Deno.readTextFile(new URL("../../docs/admin-api.md", import.meta.url));
  const blocks = endpointExamples(markdown);
  assert.ok(blocks.length >= 6, `found ${blocks.length} example blocks`);
  const db = tempDbPath();
  const store = openSqliteStore(db.path);
  const { token } = await createOperator(
    { store, clock: systemClock, actor: "cli:test" },
    "ann",
    "write",
  );
  await store.closeStore();
  await Deno.writeFile(`${db.dir}/portal.key`, crypto.getRandomValues(new Uint8Array(32)));
  // The portal in approval mode, for the approval examples; its mail server is not there
  // (port 9 refuses), so the outbox only retries.
  const server = await startServerProcess(db.path, [
    "--admin",
    "on",
    "--admin-port",
    "0",
    "--portal",
    "on",
    "--portal-mode",
    "approval",
    "--portal-origin",
    "https://keys.example.org",
    "--smtp-url",
    "smtp://127.0.0.1:9",
    "--mail-from",
    "keys@example.org",
    "--portal-secret-file",
    `${db.dir}/portal.key`,
  ]);
  try {
    assert.ok(server.adminOrigin);
    assert.notEqual(server.adminOrigin, server.origin);
    // The API port serves neither the admin API nor the console.
    const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
    const client = Deno.createHttpClient({ caCerts: [cert] });
    try {
      const onApiPort = await fetch(`${server.origin}/admin/v1/me`, {
        client,
        headers: { authorization: `Bearer ${token}` },
      });
      assert.notEqual(onApiPort.status, 200);
      assert.equal((await onApiPort.text()).includes('"role"'), false);
      const consoleOnApiPort = await fetch(`${server.origin}/`, { client });
      assert.equal((await consoleOnApiPort.text()).includes("keygate console"), false);
      const onAdminPort = await fetch(`${server.adminOrigin}/admin/v1/me`, {
        client,
        headers: { authorization: `Bearer ${token}` },
      });
      assert.deepEqual(await onAdminPort.json(), { name: "ann", role: "write" });
    } finally {
      client.close();
    }
    const prelude = [
      'auth=(-H "Authorization: Bearer $OP")',
      // Fail on any HTTP error, quietly otherwise, as a script would.
      'curl() { command curl -sS --fail-with-body "$@"; echo; }',
    ].join("\n");
    for (const [i, block] of blocks.entries()) {
      if (block.includes("/portal/pending")) await seedPendingAccounts(db.path);
      const { code, stdout, stderr } = await new Deno.Command("bash", {
        args: ["-e", "-o", "pipefail", "-c", `${prelude}\n${block}`],
        env: {
          PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
          KG: server.adminOrigin,
          CA: `--cacert ${db.dir}/keygate-cert.pem`,
          OP: token,
        },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const out = new TextDecoder().decode(stdout);
      assert.equal(
        code,
        0,
        `block ${i + 1} failed:\n${block}\n--- output\n${out}\n${new TextDecoder().decode(stderr)}`,
      );
    }
    // The examples did what they say: a user, a key created and rotated, changes by ann.
    const check = openSqliteStore(db.path);
    try {
      const ann = await check.findUserByEmail("ann@example.org");
      assert.equal(ann?.tokenTimeoutSeconds, 900);
      const keys = await check.listApiKeys(ann!.id);
      assert.equal(keys.length, 2, "created and rotated");
      const actions = new Set(
        (await check.searchAudit({ limit: 200, actor: "operator:ann" })).map((r) => r.action),
      );
      for (
        const action of [
          "user.added",
          "key.created",
          "key.rotated",
          "key.revoked",
          "portal.approved",
          "portal.refused",
        ]
      ) {
        assert.ok(actions.has(action), action);
      }
      assert.equal((await check.findPortalAccount(2))?.state, "active");
      assert.equal((await check.findUserByEmail("dev@example.com"))?.disabled, false);
      assert.equal(await check.findUserByEmail("spam@example.net"), undefined);
    } finally {
      await check.closeStore();
    }
  } finally {
    await server.stop();
    db.cleanup();
  }
});
