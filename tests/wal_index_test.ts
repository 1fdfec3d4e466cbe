import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { openCommitCounter } from "../src/wal_index.ts";
import { tempDbPath } from "./_helpers.ts";

const linuxOnly = { ignore: Deno.build.os !== "linux" };

function openWal(path: string): DatabaseSync {
  const db = new DatabaseSync(path);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("CREATE TABLE IF NOT EXISTS t (x INTEGER)");
  return db;
}

Deno.test("openCommitCounter() counts every connection's commits, one each", linuxOnly, () => {
  const file = tempDbPath();
  const reader = openWal(file.path);
  const writer = openWal(file.path);
  const counter = openCommitCounter(file.path);
  try {
    const start = counter.read();
    assert.equal(typeof start, "number");
    writer.exec("INSERT INTO t VALUES (1)");
    assert.equal(counter.read(), start! + 1);
    writer.exec("BEGIN; INSERT INTO t VALUES (2); INSERT INTO t VALUES (3); COMMIT");
    assert.equal(counter.read(), start! + 2, "a transaction is one commit");
    reader.exec("INSERT INTO t VALUES (4)");
    assert.equal(counter.read(), start! + 3, "the reader's own commits count too");
    writer.exec("BEGIN; SELECT * FROM t; COMMIT");
    assert.equal(counter.read(), start! + 3, "a transaction that writes nothing commits nothing");
    assert.equal((reader.prepare("SELECT count(*) AS n FROM t").get() as { n: number }).n, 4);
  } finally {
    writer.close();
    reader.close();
    counter.close();
    file.cleanup();
  }
});

Deno.test(
  "openCommitCounter() reads nothing without a WAL index, and after close()",
  linuxOnly,
  () => {
    const file = tempDbPath();
    const missing = openCommitCounter(file.path);
    assert.equal(missing.read(), undefined, "no database yet");
    missing.close();
    const db = openWal(file.path);
    const counter = openCommitCounter(file.path);
    try {
      assert.equal(typeof counter.read(), "number");
    } finally {
      db.close();
      counter.close();
      counter.close(); // twice is harmless
      file.cleanup();
    }
    assert.equal(counter.read(), undefined);
  },
);

Deno.test(
  "openCommitCounter() leaves SQLite's locks alone: a second process still writes",
  linuxOnly,
  async () => {
    const file = tempDbPath();
    const db = openWal(file.path);
    const counter = openCommitCounter(file.path);
    try {
      const start = counter.read()!;
      const script = `import { DatabaseSync } from "node:sqlite";
      const db = new DatabaseSync(${JSON.stringify(file.path)});
      db.exec("INSERT INTO t VALUES (42)");
      db.close();`;
      const child = await new Deno.Command(Deno.execPath(), {
        args: ["eval", script],
        stdout: "null",
        stderr: "piped",
      }).output();
      assert.equal(child.code, 0, new TextDecoder().decode(child.stderr));
      assert.equal(counter.read(), start + 1);
      const rows = db.prepare("SELECT x FROM t").all() as { x: number }[];
      assert.deepEqual(rows.map((r) => r.x), [42], "this connection sees the other's row");
    } finally {
      db.close();
      counter.close();
      file.cleanup();
    }
  },
);
