import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { openCommitCounter } from "../../../src/store/sqlite/wal_index.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";

const linuxOnly = { ignore: Deno.build.os !== "linux" };

function openWal(path: string): DatabaseSync {
  const db = new DatabaseSync(path);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("CREATE TABLE IF NOT EXISTS t (x INTEGER)");
  return db;
}

Deno.test(
  "openCommitCounter() moves with every connection's commit, and only then",
  linuxOnly,
  () => {
    const file = tempDbPath();
    const reader = openWal(file.path);
    const writer = openWal(file.path);
    const counter = openCommitCounter(file.path);
    try {
      const seen = [counter.read()];
      assert.equal(typeof seen[0], "number");
      writer.exec("INSERT INTO t VALUES (1)");
      seen.push(counter.read());
      writer.exec("BEGIN; INSERT INTO t VALUES (2); INSERT INTO t VALUES (3); COMMIT");
      seen.push(counter.read());
      reader.exec("INSERT INTO t VALUES (4)"); // the reader's own commits count too
      seen.push(counter.read());
      assert.equal(new Set(seen).size, 4, `every commit moved it: ${seen.join(", ")}`);
      writer.exec("BEGIN; SELECT * FROM t; COMMIT");
      assert.equal(counter.read(), seen[3], "a transaction that writes nothing commits nothing");
      assert.equal((reader.prepare("SELECT count(*) AS n FROM t").get() as { n: number }).n, 4);
    } finally {
      writer.close();
      reader.close();
      counter.close();
      file.cleanup();
    }
  },
);

Deno.test(
  "openCommitCounter() shares one mapping per database, released by the last counter",
  linuxOnly,
  () => {
    const file = tempDbPath();
    const db = openWal(file.path);
    const first = openCommitCounter(file.path);
    const second = openCommitCounter(file.path);
    try {
      first.close();
      assert.equal(first.read(), undefined);
      const before = second.read();
      assert.equal(typeof before, "number", "the other counter still reads");
      db.exec("INSERT INTO t VALUES (1)");
      assert.notEqual(second.read(), before);
    } finally {
      second.close();
      db.close();
      file.cleanup();
    }
  },
);

Deno.test(
  "openCommitCounter() follows a symbolic link to the database, as SQLite does",
  linuxOnly,
  () => {
    const file = tempDbPath();
    const db = openWal(file.path);
    const link = `${file.dir}/link.sqlite3`;
    Deno.symlinkSync(file.path, link);
    const counter = openCommitCounter(link);
    try {
      const before = counter.read();
      assert.equal(typeof before, "number");
      db.exec("INSERT INTO t VALUES (1)");
      assert.notEqual(counter.read(), before);
    } finally {
      counter.close();
      db.close();
      file.cleanup();
    }
  },
);

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
      const before = counter.read();
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
      assert.notEqual(counter.read(), before);
      const rows = db.prepare("SELECT x FROM t").all() as { x: number }[];
      assert.deepEqual(rows.map((r) => r.x), [42], "this connection sees the other's row");
    } finally {
      db.close();
      counter.close();
      file.cleanup();
    }
  },
);
