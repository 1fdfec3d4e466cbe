import assert from "node:assert/strict";
import {
  checkDatabasePath,
  parseStoreUrl,
  redactCredentials,
  redactRaw,
} from "../../src/store/store_url.ts";

Deno.test("parseStoreUrl() reads a full postgres:// URL", () => {
  assert.deepEqual(
    parseStoreUrl("postgres://kg:s3cr%40t@db.example:6543/auth?sslmode=verify-full"),
    {
      kind: "postgres",
      host: "db.example",
      port: 6543,
      database: "auth",
      user: "kg",
      password: "s3cr@t",
      sslmode: "verify-full",
      display: "postgres://kg:***@db.example:6543/auth?sslmode=verify-full",
    },
  );
});

Deno.test("parseStoreUrl() accepts postgresql:// and defaults port and sslmode", () => {
  const remote = parseStoreUrl("postgresql://kg@db.example/auth");
  assert.equal(remote.kind, "postgres");
  if (remote.kind !== "postgres") return;
  assert.equal(remote.port, 5432);
  assert.equal(remote.password, undefined);
  assert.equal(remote.sslmode, "require");
  assert.equal(remote.display, "postgresql://kg@db.example/auth?sslmode=require");
  const local = parseStoreUrl("postgres://kg@127.0.0.1:5433/auth");
  assert.equal(local.kind === "postgres" && local.sslmode, "disable");
  const v6 = parseStoreUrl("postgres://kg:pw@[::1]:5433/auth?sslmode=require");
  assert.equal(v6.kind === "postgres" && v6.host, "[::1]");
  assert.equal(v6.display, "postgres://kg:***@[::1]:5433/auth?sslmode=require");
});

Deno.test("parseStoreUrl() keeps a written port 80 or 443 (http's and https's defaults)", () => {
  for (const port of [80, 443]) {
    const location = parseStoreUrl(`postgres://kg:pw@db.example:${port}/auth`);
    assert.equal(location.kind === "postgres" && location.port, port);
    assert.equal(location.display, `postgres://kg:***@db.example:${port}/auth?sslmode=require`);
  }
  const v6 = parseStoreUrl("postgres://kg@[::1]:80/auth");
  assert.equal(v6.kind === "postgres" && v6.port, 80);
  assert.equal(v6.display, "postgres://kg@[::1]:80/auth?sslmode=disable");
});

Deno.test("parseStoreUrl() reads sqlite:PATH and plain paths", () => {
  assert.deepEqual(parseStoreUrl("sqlite:db/keygate.sqlite3"), {
    kind: "sqlite",
    path: "db/keygate.sqlite3",
    display: "db/keygate.sqlite3",
  });
  assert.deepEqual(parseStoreUrl("sqlite:///var/lib/keygate.db"), {
    kind: "sqlite",
    path: "/var/lib/keygate.db",
    display: "/var/lib/keygate.db",
  });
  assert.deepEqual(parseStoreUrl("/var/lib/keygate/keygate.sqlite3"), {
    kind: "sqlite",
    path: "/var/lib/keygate/keygate.sqlite3",
    display: "/var/lib/keygate/keygate.sqlite3",
  });
  assert.equal(parseStoreUrl(":memory:").kind, "sqlite");
});

Deno.test("parseStoreUrl() refuses bad URLs without showing the password", () => {
  const cases: [string, RegExp][] = [
    ["postgres://kg:hunter2@db/auth?sslmode=prefer", /sslmode "prefer" is not one of/],
    ["postgres://kg:hunter2@db/auth?sslmod=require", /unknown parameter "sslmod"/],
    ["postgres://kg:hunter2@db/", /expected one database name/],
    ["postgres://:hunter2@db/auth", /expected a user name/],
    ["postgres://kg:hunter2@db:99999/auth", /cannot parse it/],
    ["postgres://kg:hun/ter2@db/auth", /cannot parse it|expected/],
    ["postgres://kg:hunter2%zz@db/auth", /bad percent-encoding in the password/],
    ["mysql://kg:hunter2@db/auth", /mysql:\/\/\) of a kind keygate does not know; expected/],
    ["", /expected a URL or a path/],
    ["sqlite:", /expected sqlite:PATH/],
    // libpq's query-string forms: the password in the query is hidden too.
    ["postgres://kg@db/auth?password=hunter2", /unknown parameter "password"/],
    ["postgres://db/auth?user=kg&password=hunter2", /expected a user name/],
    ["postgresql://db:5432/auth?password=hunter2&user=kg", /expected a user name/],
    ["postgres://kg@db/auth#hunter2", /unexpected fragment/],
  ];
  for (const [text, message] of cases) {
    assert.throws(() => parseStoreUrl(text), (error: unknown) => {
      assert.ok(error instanceof SyntaxError, text);
      assert.match(error.message, message, text);
      assert.doesNotMatch(error.message, /hunter2|hun\/ter2|ter2/, text);
      return true;
    });
  }
});

Deno.test("redactRaw() hides everything after the user name up to the last @", () => {
  assert.equal(redactRaw("postgres://kg:p@ss/w:rd@db/auth"), "postgres://kg:***@db/auth");
  assert.equal(redactRaw("postgres://kg@db/auth"), "postgres://kg@db/auth");
  assert.equal(redactRaw("db/keygate.sqlite3"), "db/keygate.sqlite3");
});

Deno.test("redactRaw() hides a password whose @HOST was forgotten, and keeps a port", () => {
  assert.equal(redactRaw("postgres://kg:hunter2/keygate"), "postgres://kg:***/keygate");
  assert.equal(redactRaw("postgres://kg:hunter2"), "postgres://kg:***");
  assert.equal(redactRaw("postgres://kg:hunter2?sslmode=x"), "postgres://kg:***?sslmode=***");
  assert.equal(redactRaw("postgres://db:5432/keygate"), "postgres://db:5432/keygate");
  assert.equal(redactRaw("postgres://db:/keygate"), "postgres://db:/keygate");
});

Deno.test("redactRaw() hides query values and the fragment, which may hold a password", () => {
  assert.equal(
    redactRaw("postgres://db/auth?user=kg&password=s3cret&sslmode=require"),
    "postgres://db/auth?user=***&password=***&sslmode=***",
  );
  assert.equal(
    redactRaw("postgres://kg:pw@db/auth?password#x"),
    "postgres://kg:***@db/auth?password=***#***",
  );
  assert.equal(redactRaw("postgres://kg@db/auth#s3cret"), "postgres://kg@db/auth#***");
});

Deno.test("parseStoreUrl() reads libpq's multi-host form, defaulting to read-write", () => {
  assert.deepEqual(
    parseStoreUrl("postgres://kg:s3cret@db1.example:5433,db2.example,[::1]:6000/auth"),
    {
      kind: "postgres",
      host: "db1.example",
      port: 5433,
      database: "auth",
      user: "kg",
      password: "s3cret",
      sslmode: "require",
      display: "postgres://kg:***@db1.example:5433,db2.example:5432,[::1]:6000/auth" +
        "?sslmode=require&target_session_attrs=read-write",
      hosts: [
        { host: "db1.example", port: 5433 },
        { host: "db2.example", port: 5432 },
        { host: "[::1]", port: 6000 },
      ],
      targetSessionAttrs: "read-write",
    },
  );
  const primary = parseStoreUrl(
    "postgresql://kg@127.0.0.1:5432,localhost:5433/auth?target_session_attrs=primary",
  );
  assert.equal(primary.kind === "postgres" && primary.targetSessionAttrs, "primary");
  // Every host on this machine: no TLS by default, as for one host.
  assert.equal(primary.kind === "postgres" && primary.sslmode, "disable");
  assert.equal(
    primary.display,
    "postgresql://kg@127.0.0.1:5432,localhost:5433/auth?sslmode=disable&target_session_attrs=primary",
  );
  // One host with target_session_attrs: checked like several; without it, nothing changes.
  const one = parseStoreUrl("postgres://kg@db/auth?target_session_attrs=read-write");
  assert.equal(one.kind === "postgres" && one.hosts, undefined);
  assert.equal(one.kind === "postgres" && one.targetSessionAttrs, "read-write");
  assert.equal(
    one.display,
    "postgres://kg@db/auth?sslmode=require&target_session_attrs=read-write",
  );
  assert.equal("targetSessionAttrs" in parseStoreUrl("postgres://kg@db/auth"), false);
});

Deno.test("parseStoreUrl() refuses a bad host list or target_session_attrs in one line", () => {
  const cases: [string, RegExp][] = [
    ["postgres://kg:hunter2@db1,,db2/auth", /each entry of the host list, not ""$/],
    ["postgres://kg:hunter2@db1,db2:0/auth", /each entry of the host list, not "db2:0"$/],
    ["postgres://kg:hunter2@db1,db2:99999/auth", /not "db2:99999"$/],
    ["postgres://kg:hunter2@db1,db 2/auth", /not "db 2"$/],
    ["postgres://kg:hunter2@db1,/auth", /not ""$/],
    [
      "postgres://kg:hunter2@db1,db2/auth?target_session_attrs=any",
      /target_session_attrs "any" is not supported: expected read-write or primary/,
    ],
    ["postgres://kg:hunter2@db1,db2/auth?target_session_attrs=standby", /"standby" is not/],
    ["postgres://kg:hunter2@db/auth?target_session_attrs=prefer-standby", /"prefer-standby"/],
    ["postgres://kg:hunter2@db/auth?target_session_attrs=read-only", /"read-only" is not/],
  ];
  for (const [text, message] of cases) {
    assert.throws(() => parseStoreUrl(text), (error: unknown) => {
      assert.ok(error instanceof SyntaxError, text);
      assert.match(error.message, message, text);
      assert.doesNotMatch(error.message, /hunter2|\n/, text);
      return true;
    });
  }
});

Deno.test("parseStoreUrl() takes a URL keygate knows or a plain path, and refuses what is between (issue 29)", () => {
  // Each would otherwise be a new, empty SQLite file named after the text, password and all.
  const refused: [string, RegExp][] = [
    ["postgres//keygate:hunter2@127.0.0.1:55432/keygate", /postgres:\/\/ URL with its ":" missing/],
    ["postgresql//keygate@db/keygate", /postgresql:\/\/ URL with its ":" missing/],
    ["postgress://keygate:hunter2@db/keygate", /\(postgress:\/\/\) of a kind keygate does not/],
    ["postgresql:/keygate:hunter2@db/keygate", /"postgresql:" must be followed by "\/\/"/],
    ["postgres:keygate:hunter2@db/keygate", /"postgres:" must be followed by "\/\/"/],
    ["mysql://kg:hunter2@db/auth", /\(mysql:\/\/\) of a kind/],
    ["http://kg:hunter2@db/auth", /\(http:\/\/\) of a kind/],
    ["/var/lib/kg:hunter2@db/keygate.sqlite3", /has USER:PASSWORD@ in it/],
    ["kg:hunter2@db/keygate", /starts with "kg:"|has USER:PASSWORD@/],
    ["keygate@db.internal:5432/keygate", /has USER@HOST:PORT in it/],
    ["host=db user=kg password=hunter2 dbname=keygate", /key=value connection string/],
    ['"postgres://kg:hunter2@db/keygate"', /in quotes/],
    ["'postgres://kg:hunter2@db/keygate'", /in quotes/],
    ["backup:2024.sqlite3", /starts with "backup:".*write \.\/ before it/],
    ["sqlite://keygate.sqlite3", /sqlite:\/\/NAME is not a path/],
    ["sqlite:postgres://kg:hunter2@db/keygate", /after "sqlite:" is a URL, not a file path/],
    ["sqlite:/data/kg:hunter2@db/k.sqlite3", /after "sqlite:" has USER:PASSWORD@/],
  ];
  for (const [text, message] of refused) {
    assert.throws(() => parseStoreUrl(text), (error: unknown) => {
      assert.ok(error instanceof SyntaxError, text);
      assert.match(error.message, message, text);
      assert.doesNotMatch(error.message, /hunter2/, text);
      assert.doesNotMatch(redactCredentials(text), /hunter2/, text);
      assert.ok(!error.message.includes("\n"), "one line");
      return true;
    });
  }
  const paths: [string, string][] = [
    ["./backup:2024.sqlite3", "./backup:2024.sqlite3"],
    ["sqlite:./backup:2024.sqlite3", "./backup:2024.sqlite3"],
    ["C:\\keygate\\keygate.sqlite3", "C:\\keygate\\keygate.sqlite3"],
    [":memory:", ":memory:"],
    ["/srv/alice@example.org/keygate.sqlite3", "/srv/alice@example.org/keygate.sqlite3"],
    ["postgres/keygate.sqlite3", "postgres/keygate.sqlite3"],
  ];
  for (const [text, path] of paths) {
    const location = parseStoreUrl(text);
    assert.equal(location.kind, "sqlite", text);
    assert.equal(location.kind === "sqlite" && location.path, path, text);
  }
});

Deno.test("checkDatabasePath(): --db is a file path; a URL is sent to --store", () => {
  for (const text of ["postgres://kg:hunter2@db/keygate", "sqlite:k.db", "POSTGRESQL://kg@db/k"]) {
    assert.throws(() => checkDatabasePath(text), /it is a store URL: give it with --store/);
  }
  assert.throws(
    () => checkDatabasePath("postgres//kg:hunter2@db/keygate"),
    (error: Error) =>
      /URL with its ":" missing; --db takes a file path/.test(error.message) &&
      !error.message.includes("hunter2"),
  );
  checkDatabasePath("/var/lib/keygate/keygate.sqlite3");
  checkDatabasePath(":memory:");
});

Deno.test("redactCredentials() hides a password in URLs, URL-like paths and key=value strings", () => {
  const cases: [string, string][] = [
    ["postgres://kg:hunter2@db/auth", "postgres://kg:***@db/auth"],
    ["postgres//kg:hunter2@db:5432/auth", "postgres//kg:***@db:5432/auth"],
    ["postgresql:/kg:hun@ter2@db/auth", "postgresql:/kg:***@db/auth"],
    ["/data/kg:hunter2@db/k.sqlite3", "/data/kg:***@db/k.sqlite3"],
    ["kg:hunter2@db", "kg:***@db"],
    ["host=db password=hunter2 user=kg", "host=db password=*** user=kg"],
    ["host=db password='hunter 2' user=kg", "host=db password=*** user=kg"],
    ["--store=postgres://kg:hunter2@db/k", "--store=postgres://kg:***@db/k"],
    ["db/keygate.sqlite3", "db/keygate.sqlite3"],
    ["alice@example.org", "alice@example.org"],
  ];
  for (const [text, shown] of cases) assert.equal(redactCredentials(text), shown, text);
});
