/**
 * The SQLite backend: the store contract (contract.ts), and what only
 * SQLite has (pragmas, migrations, its error texts).
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { hashSecret } from "../../src/auth/credentials.ts";
import { deleteEndedTokensUntilNone } from "../../src/auth/janitor.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { MIGRATIONS } from "../../src/store/sqlite/migrations.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { openTempStore } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { assertCanonicalEmailsMigrated, PRE_NFC_EMAILS } from "./_contract_fixtures.ts";
import { runStoreContract } from "./contract.ts";

runStoreContract({
  name: "sqlite",
  // deno-lint-ignore require-await
  async open() {
    const db = openTempStore();
    const raw = new DatabaseSync(db.path);
    return {
      store: db.store,
      // deno-lint-ignore require-await
      async execSql(sql) {
        raw.exec(sql);
      },
      async close() {
        raw.close();
        await db.close();
      },
    };
  },
});

Deno.test("openSqliteStore() applies every migration once and sets the pragmas", async () => {
  const db = tempDbPath();
  try {
    await openSqliteStore(db.path).closeStore();
    await openSqliteStore(db.path).closeStore(); // idempotent
    const raw = new DatabaseSync(db.path);
    assert.equal(
      (raw.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
      MIGRATIONS.at(-1)!.version,
    );
    assert.equal(
      (raw.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode,
      "wal",
    );
    const tables = raw.prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table'")
      .all() as { name: string; sql: string }[];
    for (const table of ["users", "api_keys", "tokens"]) {
      const found = tables.find((t) => t.name === table);
      assert.ok(found, table);
      assert.match(found.sql, /STRICT$/, table);
    }
    raw.close();
  } finally {
    db.cleanup();
  }
});

Deno.test("openSqliteStore() enforces foreign keys and lower-case e-mails, in SQLite's words", async () => {
  using db = openTempStore();
  const { store } = db;
  await assert.rejects(
    store.insertToken({
      tokenHash: hashSecret("t"),
      userId: 99,
      apiKeyId: 99,
      issuedAt: 1,
      expiresAt: 2,
      maxLiveTokens: 10,
    }, { audit: undefined }),
    /FOREIGN KEY/,
  );
  await assert.rejects(
    store.insertUser({ email: "Upper@b.org", passwordHash: "x", tokenTimeoutSeconds: null }, {
      now: 1,
      audit: undefined,
    }),
    /CHECK/,
  );
  assert.equal(await store.countRows("tokens"), 0);
});

Deno.test("deleteEndedTokens() until none is left deletes only the ended rows, each recorded", async () => {
  using db = openTempStore();
  const { store } = db;
  const user = await store.insertUser(
    { email: "a@b.org", passwordHash: "x", tokenTimeoutSeconds: null },
    { now: 0, audit: undefined },
  );
  const key = await store.insertApiKey(
    { userId: user.id, keyHash: hashSecret("k1"), prefix: "k1", label: "" },
    { now: 0, audit: undefined },
  );
  for (let i = 1; i <= 7; i++) {
    await store.insertToken({
      tokenHash: hashSecret(`t${i}`),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: i,
      expiresAt: i % 2 === 0 ? 5000 : 500,
      maxLiveTokens: 10,
    }, { audit: undefined });
  }
  const before = db.sqlite.countChanges();
  assert.equal(await deleteEndedTokensUntilNone(store, 1000), 4);
  // Four token rows, and the change record's row for each (written by its trigger).
  assert.equal(db.sqlite.countChanges() - before, 8);
  assert.equal(await store.countRows("tokens"), 3);
});

Deno.test("migration 3 upgrades a version-1 database and keeps its rows working", async () => {
  const db = tempDbPath();
  try {
    const raw = new DatabaseSync(db.path);
    migrate(raw, MIGRATIONS.filter((m) => m.version === 1));
    raw.prepare(
      `INSERT INTO users (email, password_hash, created_at, updated_at)
       VALUES ('a@b.org', 'x', 1, 1)`,
    ).run();
    raw.prepare(
      `INSERT INTO api_keys (key_hash, prefix, user_id, created_at) VALUES (:h, 'k1', 1, 1)`,
    ).run({ h: hashSecret("k1") });
    raw.prepare(
      `INSERT INTO tokens (token_hash, user_id, api_key_id, issued_at, expires_at)
       VALUES (:h, 1, 1, 1000, 9000)`,
    ).run({ h: hashSecret("t1") });
    raw.close();
    const store = openSqliteStore(db.path);
    const key = (await store.findApiKeyById(1))!;
    assert.deepEqual(
      [key.expiresAt, key.disabledAt, key.replacedBy, key.lastUsedAt, key.useCount],
      [null, null, null, null, 0],
    );
    assert.equal((await store.findUserByEmail("a@b.org"))!.tokensValidFrom, 0);
    assert.ok(
      await store.findTokenGrant({
        tokenHash: hashSecret("t1"),
        keyHash: hashSecret("k1"),
        now: 2000,
      }),
    );
    assert.deepEqual(await store.listAudit(), []);
    await store.closeStore();
  } finally {
    db.cleanup();
  }
});

Deno.test("migration 6 stores older e-mails in NFC, leaves colliding ones and warns once, naming no address", async () => {
  const db = tempDbPath();
  try {
    const raw = new DatabaseSync(db.path);
    migrate(raw, MIGRATIONS.filter((m) => m.version <= 5));
    // SQLite's lower() knows only ASCII: an upper-case "É" could be stored too.
    const rows: [string, string | undefined][] = [...PRE_NFC_EMAILS, [
      "\u00c9ve@b.org",
      "\u00e9ve@b.org",
    ]];
    const insert = raw.prepare(
      "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES (?, 'x', 1, 1)",
    );
    for (const [email] of rows) insert.run(email);
    raw.close();
    await assertCanonicalEmailsMigrated(
      (onMigrationWarning) => Promise.resolve(openSqliteStore(db.path, { onMigrationWarning })),
      rows,
    );
  } finally {
    db.cleanup();
  }
});

Deno.test("migrate() needs versions 1..n in order and refuses a database from a newer keygate", () => {
  const db = new DatabaseSync(":memory:");
  try {
    assert.deepEqual(MIGRATIONS.map((m) => m.version), MIGRATIONS.map((_, i) => i + 1));
    assert.throws(
      () => migrate(db, [{ version: 2, name: "gap", sql: "" }]),
      /Migration gap is numbered 2, not 1/,
    );
    db.exec(`PRAGMA user_version = ${MIGRATIONS.length + 1}`);
    assert.throws(() => migrate(db, MIGRATIONS), /newer than this keygate knows/);
  } finally {
    db.close();
  }
});
