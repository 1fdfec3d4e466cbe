/**
 * The actions whose entries hold an address in their detail ({@link AUDIT_ADDRESS_DETAIL_ACTIONS},
 * the only ones a deletion searches by detail, src/store/audit_anonymize.ts) are every one that
 * writes one: the source's audit entries are read for details that take an e-mail, and each path
 * that writes one (portal, admin, API) is driven on the backend `KEYGATE_TEST_STORE` names, with
 * rows that name the user in their detail alone (another actor, another subject), which a
 * deletion must then rewrite.
 */
import assert from "node:assert/strict";
import { AUDIT_ACTIONS } from "../../src/auth/audit.ts";
import { createKey, rotateKey } from "../../src/auth/keys.ts";
import { deleteUser, renameUser } from "../../src/auth/users.ts";
import { AUDIT_ADDRESS_DETAIL_ACTIONS } from "../../src/store/audit_anonymize.ts";
import { BASE, issueToken } from "../_helpers/requests.ts";
import { walkSync } from "../_helpers/walk_source.ts";
import {
  activeUser,
  type PortalBrowser,
  type PortalRig,
  startPortalRig,
} from "../portal/_portal.ts";
import { json, OTHER_PASSWORD, PASSWORD } from "../portal/_portal_answers.ts";
import { readCode } from "../portal/_smtp.ts";

const SRC = new URL("../../src/", import.meta.url);

/** Skips a string or template literal starting at `at`; returns the index after it. */
function skipLiteral(text: string, at: number): number {
  const quote = text[at];
  let i = at + 1;
  while (i < text.length && text[i] !== quote) i += text[i] === "\\" ? 2 : 1;
  return i + 1;
}

/**
 * The detail object literal of the audit entry whose action literal ends at `from`: the first
 * `{` at the entry's own depth, or `undefined` when the call or object ends first.
 */
function findDetail(text: string, from: number): string | undefined {
  let depth = 0;
  for (let i = from; i < text.length;) {
    const c = text[i];
    if (c === '"' || c === "'" || c === "`") {
      i = skipLiteral(text, i);
      continue;
    }
    if (c === "(" || c === "[") depth++;
    if (c === ")" || c === "]" || c === "}") {
      if (depth === 0) return undefined;
      depth--;
    }
    if (c === "{" && depth === 0) {
      let inner = 0;
      for (let j = i; j < text.length;) {
        if (text[j] === '"' || text[j] === "'" || text[j] === "`") {
          j = skipLiteral(text, j);
          continue;
        }
        if (text[j] === "{") inner++;
        if (text[j] === "}" && --inner === 0) return text.slice(i, j + 1);
        j++;
      }
    }
    i++;
  }
  return undefined;
}

/** Every action of `src/` whose audit entry's detail takes an e-mail (`…email…`). */
function findAddressDetailActions(): { found: Set<string>; entries: number } {
  const found = new Set<string>();
  let entries = 0;
  const actions = new RegExp(
    `"(${AUDIT_ACTIONS.map((a) => a.replace(".", "\\.")).join("|")})"`,
    "g",
  );
  for (const url of walkSync(SRC)) {
    // The vocabulary and the store's lists name actions; they append no entry.
    if (/\/src\/(auth\/audit\.ts|store\/)/.test(url.href)) continue;
    const text = Deno.readTextFileSync(url);
    for (const match of text.matchAll(actions)) {
      entries++;
      const detail = findDetail(text, match.index + match[0].length);
      if (detail !== undefined && /email/i.test(detail)) found.add(match[1]);
    }
  }
  return { found, entries };
}

Deno.test("AUDIT_ADDRESS_DETAIL_ACTIONS lists every action whose entry's detail takes an e-mail", () => {
  const { found, entries } = findAddressDetailActions();
  assert.ok(entries >= 40, `${entries} audit entries read in src/: the scan found too few`);
  assert.deepEqual([...found].sort(), [...AUDIT_ADDRESS_DETAIL_ACTIONS].sort());
});

/** Changes the signed-in user's e-mail through the portal, confirming with the mailed code. */
async function changeEmail(rig: PortalRig, browser: PortalBrowser, email: string) {
  let response = await browser.call("POST", "/email", { email, password: PASSWORD });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Confirm your new e-mail"));
  response = await browser.call("POST", "/email/confirm", { code });
  assert.equal(response.status, 200);
  await response.body?.cancel();
}

/** The string values of a detail that are addresses. */
function addressesOf(detail: Readonly<Record<string, unknown>>): string[] {
  return Object.values(detail).filter((v): v is string => typeof v === "string" && v.includes("@"));
}

Deno.test("[e2e] a deletion rewrites the address in the detail of every action that writes one", async () => {
  await using rig = await startPortalRig();
  const { store } = rig.app;
  const ops = { store, clock: rig.app.clock, actor: "cli:ops" };
  const addresses = ["first@example.org", "second@example.org", "third@example.org"];
  // The leaver: signs up as first@, moves itself to second@ (portal.email_change_requested,
  // portal.email_changed), makes a key in the portal (key.created by itself).
  const browser = await activeUser(rig, addresses[0]);
  await changeEmail(rig, browser, addresses[1]);
  const own = await json(await browser.call("POST", "/keys", { label: "own" }));
  // An operator renames it to third@ (user.renamed), makes and rotates a key for it (key.created
  // by `cli:ops`, subject the key: the detail alone names the user).
  const leaver = (await store.findUserByEmail(addresses[1]))!;
  await renameUser(ops, leaver, addresses[2]);
  const renamed = (await store.findUserById(leaver.id))!;
  const made = await createKey(ops, renamed, { label: "ops" });
  await rotateKey(ops, made.key);
  // A token revoked with its own key (token.revoked by `api_key:ID`).
  const token = await issueToken(rig.app.handler, addresses[2], PASSWORD, own.api_key);
  const url = new URL(`${BASE}/api/secure/userservice/tokens/current`);
  url.searchParams.set("api_key", own.api_key);
  url.searchParams.set("api_token", token);
  const revoked = await rig.app.handler(new Request(url, { method: "DELETE" }));
  assert.equal(revoked.status, 204);
  await revoked.body?.cancel();
  // Another user asks for the leaver's address (portal.email_change_requested by that user,
  // subject that user: the detail's `to` alone names the leaver).
  const asker = await activeUser(rig, "asker@example.org", OTHER_PASSWORD);
  const asked = await asker.call("POST", "/email", {
    email: addresses[2],
    password: OTHER_PASSWORD,
  });
  assert.equal(asked.status, 202);
  await asked.body?.cancel();

  const before = await store.listAudit();
  const named = before.filter((row) => addressesOf(row.detail).length > 0);
  for (const row of named) {
    assert.ok(
      AUDIT_ADDRESS_DETAIL_ACTIONS.includes(row.action),
      `${row.action} wrote an address into its detail and is not searched`,
    );
  }
  assert.deepEqual(
    [...new Set(named.map((row) => row.action))].sort(),
    [...AUDIT_ADDRESS_DETAIL_ACTIONS].sort(),
    "every listed action driven",
  );
  const byDetailAlone = named.filter((row) =>
    !row.subject.startsWith("user:") && row.actor !== `portal:user:${leaver.id}`
  );
  assert.deepEqual(
    byDetailAlone.map((row) => row.action).sort(),
    ["key.created", "key.created", "token.revoked"],
  );

  await deleteUser(ops, renamed);

  const after = await store.listAudit();
  for (const row of after) {
    const left = addresses.filter((address) => JSON.stringify(row).includes(address));
    assert.deepEqual(left, [], `${row.action} (${row.actor}, ${row.subject}) keeps an address`);
  }
  const ref = after.at(-1)!.subject;
  assert.match(ref, /^user:deleted:/);
  for (const row of named) {
    const now = after.find((kept) => kept.id === row.id)!;
    assert.ok(addressesOf(now.detail).every((value) => value === ref), `${row.action} rewritten`);
  }
  const kept = after.find((row) =>
    row.actor !== ops.actor && row.subject === "user:asker@example.org"
  );
  assert.ok(kept, "the asker's entries keep their subject");
});
