/**
 * The hint that follows a PostgreSQL store's opening failure (issue 29): each
 * driver error an operator meets first, with what to check or change, and
 * never the password. The end-to-end cases (TLS refused, a password missing
 * or wrong, a missing database, nothing listening) run against a real
 * cluster in tests/e2e/postgres/operator_test.ts.
 */
import assert from "node:assert/strict";
import { StoreUnavailable } from "../../../src/store/errors.ts";
import { explainPostgresOpenError } from "../../../src/store/postgres/explain_open.ts";
import { openPostgresStore } from "../../../src/store/postgres/open_postgres_store.ts";
import { parseStoreUrl, type PostgresLocation } from "../../../src/store/store_url.ts";

function at(url: string): PostgresLocation {
  return parseStoreUrl(url) as PostgresLocation;
}

/** An error as postgres.js or Node's sockets make them: a message and a code. */
function driverError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

const REMOTE = at("postgres://keygate@db.internal/keygate");
const WITH_PASSWORD = at("postgres://keygate:hunter2@db.internal/keygate");

Deno.test("explainPostgresOpenError(): TLS refused by a server without it, under require or verify-full", () => {
  const refused = driverError(
    "Client network socket disconnected before secure TLS connection was established",
    "ECONNRESET",
  );
  const text = explainPostgresOpenError(refused, REMOTE, {});
  assert.match(text, /^Client network socket disconnected .*; the server does not accept TLS/);
  assert.match(text, /which sslmode=require asks for \(without sslmode in the URL: require for/);
  assert.match(text, /add \?sslmode=disable to the URL if the network between is private$/);
  const verify = at("postgres://keygate@db.internal/keygate?sslmode=verify-full");
  assert.match(explainPostgresOpenError(refused, verify, {}), /which sslmode=verify-full asks/);
  // With sslmode=disable the same words cannot mean that: no hint is better than a wrong one.
  const plain = at("postgres://keygate@db.internal/keygate?sslmode=disable");
  assert.equal(
    explainPostgresOpenError(refused, plain, {}),
    "Client network socket disconnected before secure TLS connection was established",
  );
});

Deno.test("explainPostgresOpenError(): an untrusted certificate under verify-full", () => {
  const verify = at("postgres://keygate@db.internal/keygate?sslmode=verify-full");
  for (
    const error of [
      driverError("self-signed certificate", "DEPTH_ZERO_SELF_SIGNED_CERT"),
      new Error("invalid peer certificate: UnknownIssuer"),
      new Error("invalid peer certificate: NotValidForName"),
    ]
  ) {
    assert.match(
      explainPostgresOpenError(error, verify, {}),
      /; with sslmode=verify-full the server's certificate must be signed by a CA this system trusts and name db\.internal: .*or use sslmode=require/,
    );
  }
});

Deno.test("explainPostgresOpenError(): password authentication names where the password came from", () => {
  const failed = Object.assign(
    new Error('password authentication failed for user "keygate"'),
    { name: "PostgresError", code: "28P01" },
  );
  assert.equal(
    explainPostgresOpenError(failed, REMOTE, {}),
    'password authentication failed for user "keygate"; the URL has no password and PGPASSWORD ' +
      "is not set: put the password in the URL (postgres://USER:PASSWORD@HOST/DATABASE, " +
      "percent-encoded) or in PGPASSWORD",
  );
  assert.match(
    explainPostgresOpenError(failed, REMOTE, { PGPASSWORD: "x" }),
    /the URL has no password, so PGPASSWORD's was used: check PGPASSWORD$/,
  );
  const withPassword = explainPostgresOpenError(failed, WITH_PASSWORD, { PGPASSWORD: "x" });
  assert.match(
    withPassword,
    /; check the password in the URL \(percent-encode @, : and \/ in it\)$/,
  );
  assert.doesNotMatch(withPassword, /hunter2/);
});

Deno.test("explainPostgresOpenError(): the server's other refusals, and the network's", () => {
  const cases: [unknown, RegExp][] = [
    [
      driverError(
        'no pg_hba.conf entry for host "10.0.0.11", user "keygate", database "keygate", no encryption',
        "28000",
      ),
      /pg_hba\.conf has no line that lets keygate reach keygate from this host: add one/,
    ],
    [
      driverError('role "keygate" does not exist', "28000"),
      /; create the role first: createuser --pwprompt keygate$/,
    ],
    [
      driverError('database "keygate" does not exist', "3D000"),
      /; create the database first: createdb --owner keygate keygate$/,
    ],
    [
      driverError("permission denied for schema public", "42501"),
      /keygate may not create keygate's tables: make it the database's owner/,
    ],
    [
      driverError("sorry, too many clients already", "53300"),
      /max_connections is reached: each keygate instance opens up to 11/,
    ],
    [
      driverError("connect ECONNREFUSED 10.0.0.5:5432", "ECONNREFUSED"),
      /nothing accepts connections at db\.internal:5432: check that PostgreSQL runs/,
    ],
    [
      driverError("getaddrinfo ENOTFOUND db.internal", "ENOTFOUND"),
      /; the host name db\.internal does not resolve$/,
    ],
    [
      driverError("write CONNECT_TIMEOUT db.internal:5432", "CONNECT_TIMEOUT"),
      /db\.internal:5432 cannot be reached: check the host, the port and the firewalls/,
    ],
    // Wrapped by the store: the reason is the chain, the hint the driver's.
    [
      new StoreUnavailable("Database unreachable", {
        cause: driverError("connect ECONNREFUSED 10.0.0.5:5432", "ECONNREFUSED"),
      }),
      /^Database unreachable: connect ECONNREFUSED 10\.0\.0\.5:5432; nothing accepts/,
    ],
  ];
  for (const [error, message] of cases) {
    assert.match(explainPostgresOpenError(error, REMOTE, {}), message);
  }
  assert.equal(
    explainPostgresOpenError(new Error("something\nelse"), REMOTE, {}),
    "something else",
    "an unknown error: its message on one line, no hint",
  );
});

Deno.test("openPostgresStore() gives up when a port accepts connections but never speaks PostgreSQL", async () => {
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (silent.addr as Deno.NetAddr).port;
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of silent) held.push(conn);
  })();
  try {
    const started = performance.now();
    await assert.rejects(
      openPostgresStore(`postgres://keygate@127.0.0.1:${port}/keygate`, {
        firstAnswerTimeoutMs: 300,
      }),
      (error: Error) => {
        assert.equal(
          error.message,
          `No answer from 127.0.0.1:${port} within 0.3 s of connecting: check that a ` +
            "PostgreSQL server listens there",
        );
        return true;
      },
    );
    assert.ok(performance.now() - started < 5000);
  } finally {
    silent.close();
    for (const conn of held) conn.close();
    await accepting.catch(() => {});
  }
});
