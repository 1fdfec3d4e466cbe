import assert from "node:assert/strict";
import { parseStoreUrl, redactRaw } from "../../src/store/store_url.ts";

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
    [
      "mysql://kg:hunter2@db/auth",
      /expected postgres:\/\/, postgresql:\/\/, sqlite:PATH or a path/,
    ],
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
