/**
 * The audit log's one rewrite, on the backend `KEYGATE_TEST_STORE` names: `deleteUser` with
 * `anonymousRef` goes by the user's holds of its addresses (never a row of another holder of
 * one), reaches the user's addresses in other entries' details, empties its mail from the
 * outbox; and the append-only trigger lets an update through only inside that delete's
 * transaction, and only one that makes addresses anonymous (src/store/audit_anonymize.ts).
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { AUDIT_REDACT_FUNCTION } from "../../src/store/sqlite/audit_anonymize.ts";
import type { AuditEntry, Store } from "../../src/store/store.ts";
import { openTestStore, querySqlAt, TEST_STORE_NAME } from "../_helpers/store.ts";

const T0 = 1_000_000;
const REF = "user:deleted:abcdefghijklmnop";
const MAIL = { subject: "Notice", text: "Hello" };

function entry(action: string, subject: string, detail = {}, actor = "cli:test"): AuditEntry {
  return { at: T0, actor, action, subject, detail };
}

async function addUser(store: Store, email: string) {
  return await store.insertUser(
    { email, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    { now: T0, audit: entry("user.added", `user:${email}`) },
  );
}

async function mail(store: Store, recipient: string) {
  await store.insertMail({ recipient, ...MAIL }, { now: T0, audit: undefined });
}

Deno.test("deleteUser() with anonymousRef rewrites the user's rows only, and its mail", async () => {
  await using db = await openTestStore();
  const { store } = db;
  // Alice: first@ (a key's entry names it), then moved@ (her own entries as portal:user:ID).
  const alice = await addUser(store, "first@b.org");
  const aliceActor = `portal:user:${alice.id}`;
  await store.appendAudit(entry("key.created", "api_key:1", { user: "first@b.org", label: "a" }));
  await mail(store, "first@b.org");
  await store.updateUserEmail(alice.id, {
    email: "moved@b.org",
    now: T0,
    audit: entry("user.renamed", "user:moved@b.org", { from: "first@b.org" }),
  });
  await store.appendAudit(
    entry("token.revoked", "token:7", { user: "moved@b.org", client: "192.0.2.1" }, aliceActor),
  );
  await store.appendAudit(
    entry("portal.email_change_requested", "user:moved@b.org", { to: "asked@b.org" }, aliceActor),
  );
  await mail(store, "moved@b.org");
  await mail(store, "asked@b.org");
  // Bob takes first@ after her: his entries and mail stay.
  const bob = await addUser(store, "first@b.org");
  await store.appendAudit(entry("key.created", "api_key:2", { user: "first@b.org", label: "b" }));
  await store.appendAudit(entry("user.disabled", "user:first@b.org"));
  await mail(store, "first@b.org");
  const before = await store.listAudit();
  const bobsRows = before.slice(5);
  assert.deepEqual(bobsRows.map((row) => row.action), [
    "user.added",
    "key.created",
    "user.disabled",
  ]);

  const deleted = await store.deleteUser(alice.id, {
    now: T0 + 1,
    anonymousRef: REF,
    anonymousActor: aliceActor,
    audit: (gone) => entry("portal.account_deleted", REF, { rows: gone.auditRows ?? -1 }),
  });
  assert.deepEqual(deleted, { apiKeys: 0, tokens: 0, auditRows: 3 });

  const after = await store.listAudit();
  assert.equal(after.length, before.length + 1);
  assert.deepEqual(
    after.slice(0, 5).map((row) => [row.action, row.subject, row.detail]),
    [
      ["user.added", REF, {}],
      ["key.created", "api_key:1", { user: REF, label: "a" }],
      ["user.renamed", REF, { from: REF }],
      ["token.revoked", "token:7", { user: REF, client: "192.0.2.1" }],
      ["portal.email_change_requested", REF, { to: REF }],
    ],
  );
  assert.deepEqual(after.slice(5, -1), bobsRows, "bob's rows as they were");
  assert.deepEqual(
    after.map((row) => [row.id, row.at, row.actor, row.action]).slice(0, -1),
    before.map((row) => [row.id, row.at, row.actor, row.action]),
  );
  const outbox = await querySqlAt(db.path, "SELECT recipient FROM mail_outbox ORDER BY id");
  // first@ is bob's now: its mail stays (it may be his); alice's other addresses' mail is gone.
  assert.deepEqual(outbox.map((row) => row.recipient), ["first@b.org", "first@b.org"]);
  assert.equal((await store.findUserByEmail("first@b.org"))?.id, bob.id);
});

Deno.test("the append-only trigger refuses an update outside the delete's transaction", async () => {
  await using db = await openTestStore();
  await addUser(db.store, "victim@b.org");
  const forged = TEST_STORE_NAME === "postgres"
    ? [
      `SET keygate.audit_redact = '${REF}';
       UPDATE audit_log SET subject = '${REF}' WHERE subject = 'user:victim@b.org'`,
      // A marker written by an earlier transaction opens nothing.
      `INSERT INTO audit_redact (ref) VALUES ('${REF}')`,
      `UPDATE audit_log SET subject = '${REF}' WHERE subject = 'user:victim@b.org'`,
    ]
    : [
      `UPDATE audit_log SET subject = '${REF}' WHERE subject = 'user:victim@b.org'`,
    ];
  for (const sql of forged) {
    if (sql.startsWith("INSERT")) await querySqlAt(db.path, sql);
    else await assert.rejects(querySqlAt(db.path, sql), /append-only|keygate_audit_redact/);
  }
  assert.deepEqual((await db.store.listAudit()).map((row) => row.subject), ["user:victim@b.org"]);
});

/**
 * Inside a transaction that opened the exception (PostgreSQL: its own marker row; SQLite: a
 * connection whose `keygate_audit_redact()` answers the id, as the store's does during a
 * delete), only making addresses anonymous passes.
 */
Deno.test("inside the exception, only subjects and addresses may become the id", async () => {
  await using db = await openTestStore();
  await addUser(db.store, "victim@b.org");
  await db.store.appendAudit(entry("key.created", "api_key:3", { user: "victim@b.org", n: 1 }));
  const refused = [
    `UPDATE audit_log SET subject = 'user:someone-else@b.org' WHERE subject = 'user:victim@b.org'`,
    `UPDATE audit_log SET subject = '${REF}' WHERE subject = 'api_key:3'`,
    `UPDATE audit_log SET actor = 'cli:x' WHERE subject = 'user:victim@b.org'`,
    `UPDATE audit_log SET at = 5 WHERE subject = 'user:victim@b.org'`,
    `UPDATE audit_log SET detail = '{"forged":true}' WHERE subject = 'user:victim@b.org'`,
    `UPDATE audit_log SET detail = '{"user":"${REF}","n":2}' WHERE subject = 'api_key:3'`,
    `UPDATE audit_log SET detail = '{"user":"${REF}"}' WHERE subject = 'api_key:3'`,
    `UPDATE audit_log SET detail = '{"user":"${REF}","n":1,"x":1}' WHERE subject = 'api_key:3'`,
    `UPDATE audit_log SET detail = '{"user":"x@y.org","n":1}' WHERE subject = 'api_key:3'`,
  ];
  const allowed = [
    `UPDATE audit_log SET subject = '${REF}' WHERE subject = 'user:victim@b.org'`,
    `UPDATE audit_log SET detail = '{"user":"${REF}","n":1}' WHERE subject = 'api_key:3'`,
  ];
  if (TEST_STORE_NAME === "postgres") {
    const open = `BEGIN; INSERT INTO audit_redact (ref) VALUES ('${REF}');`;
    for (const sql of refused) {
      await assert.rejects(querySqlAt(db.path, `${open} ${sql}; COMMIT`), /append-only/, sql);
    }
    await querySqlAt(db.path, `${open} ${allowed.join("; ")}; COMMIT`);
  } else {
    const raw = new DatabaseSync(db.path);
    try {
      raw.function(AUDIT_REDACT_FUNCTION, () => REF);
      for (const sql of refused) assert.throws(() => raw.exec(sql), /append-only/, sql);
      for (const sql of allowed) raw.exec(sql);
    } finally {
      raw.close();
    }
  }
  const rows = await db.store.listAudit();
  assert.deepEqual(rows.map((row) => [row.subject, row.detail]), [
    [REF, {}],
    ["api_key:3", { user: REF, n: 1 }],
  ]);
});
