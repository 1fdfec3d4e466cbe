/**
 * isWriteStatement() and Connection.sql(): a statement that starts with `WITH` counts as a grant
 * write only when SQLite says it writes, so a `WITH … SELECT` read neither evicts caches nor
 * waits for a WAL sync.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { isWriteStatement } from "../../../src/store/sqlite/counted_statement.ts";
import { openConnection } from "../../../src/store/sqlite/connection.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";

const WITH_SELECT =
  "WITH picked AS (SELECT n FROM scratch WHERE n > :at_least) SELECT n FROM picked";
const WITH_INSERT =
  "WITH next AS (SELECT max(n) + 1 AS n FROM scratch) INSERT INTO scratch SELECT n FROM next";
const WITH_UPDATE =
  "WITH top AS (SELECT max(n) AS n FROM scratch) UPDATE scratch SET n = n + 10 WHERE n IN (SELECT n FROM top)";

Deno.test("isWriteStatement() asks SQLite whether a WITH statement writes", () => {
  const db = new DatabaseSync(":memory:");
  try {
    db.exec("CREATE TABLE scratch (n INTEGER)");
    assert.equal(isWriteStatement(db, WITH_SELECT), false);
    assert.equal(
      isWriteStatement(
        db,
        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3) SELECT i FROM c",
      ),
      false,
    );
    assert.equal(isWriteStatement(db, "  with picked AS (SELECT 1) SELECT * FROM picked"), false);
    assert.equal(isWriteStatement(db, WITH_INSERT), true);
    assert.equal(isWriteStatement(db, WITH_UPDATE), true);
    assert.equal(
      isWriteStatement(
        db,
        "WITH low AS (SELECT 1 AS n) DELETE FROM scratch WHERE n IN (SELECT n FROM low)",
      ),
      true,
    );
    assert.equal(isWriteStatement(db, "INSERT INTO scratch VALUES (1)"), true);
    assert.equal(isWriteStatement(db, "SELECT n FROM scratch"), false);
    assert.deepEqual(db.prepare("SELECT n FROM scratch").all(), [], "classifying ran nothing");
  } finally {
    db.close();
  }
});

Deno.test("Connection.sql() counts a WITH … SELECT as a read, a WITH … INSERT or UPDATE as a grant write", async () => {
  using file = tempDbPath();
  const conn = openConnection(file.path, { durability: "grants" });
  try {
    conn.db.exec("CREATE TABLE scratch (n INTEGER); INSERT INTO scratch VALUES (1), (2)");
    const read = conn.sql(WITH_SELECT);
    const insert = conn.sql(WITH_INSERT);
    const update = conn.sql(WITH_UPDATE);
    const writes = conn.readGrantWrites();

    const rows = await conn.write(() => read.all({ at_least: 0 }));
    assert.deepEqual(rows.map((row) => row.n), [1, 2]);
    assert.equal(conn.readGrantWrites(), writes, "a read that returns rows changed none");
    assert.equal(conn.readWalSyncs(), 0, "a write that only read owes no sync");

    await conn.write(() => insert.run());
    assert.equal(conn.readGrantWrites(), writes + 1);
    assert.equal(conn.readWalSyncs(), 1);
    await conn.write(() => update.run());
    assert.equal(conn.readGrantWrites(), writes + 2);
    assert.equal(conn.readWalSyncs(), 2);
    assert.deepEqual(read.all({ at_least: 0 }).map((row) => row.n), [1, 2, 13]);
    assert.equal(conn.readGrantWrites(), writes + 2);
  } finally {
    conn.close();
  }
});
