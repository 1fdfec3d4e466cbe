/**
 * The PostgreSQL operator's mistakes as an operator makes them (issue 29), through
 * `deno task admin …` and `deno task start …` as child processes against a throwaway
 * cluster: a store setting that is no URL, two settings at once, TLS refused, a wrong
 * password, a missing database or server. Each refusal is one line, names where the setting
 * came from, says what to do and never shows a password (the working paths:
 * operator_test.ts).
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { startTestCluster } from "../../_helpers/postgres_cluster.ts";
import { REPO, runTask, snapshotDb, type TaskRun } from "../../_helpers/task.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;
const PASSWORD = "correct horse battery";

/** Asserts one line on standard error, exactly `line` or matching it. */
function assertOneLine(run: TaskRun, line: string | RegExp): void {
  assert.ok(run.err.endsWith("\n") && run.err.split("\n").length === 2, `one line: ${run.err}`);
  if (typeof line === "string") assert.equal(run.err, `${line}\n`);
  else assert.match(run.err.trimEnd(), line);
  assert.doesNotMatch(run.err, /^\s+at |Uncaught|Stack backtrace/m);
}

Deno.test({
  name:
    "[pg task] a store setting that looks like a URL but is not one: refused in one line, exit 2, no password, nothing created",
  ignore,
  async fn() {
    const port = cluster!.port;
    const before = snapshotDb();
    const typo = `postgres//keygate:kg-pass@127.0.0.1:${port}/keygate`;
    const shown = `postgres//keygate:***@127.0.0.1:${port}/keygate`;
    const expected = 'it looks like a postgres:// URL with its ":" missing; expected ' +
      "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, sqlite:PATH or a file path";
    const runs: [TaskRun, string][] = [
      [
        await runTask("start", ["--port", "0", "--store", typo]),
        `keygate: Invalid --store "${shown}": ${expected} (see --help)`,
      ],
      [
        await runTask("start", ["--port", "0"], { env: { KEYGATE_STORE: typo } }),
        `keygate: Invalid KEYGATE_STORE "${shown}": ${expected} (see --help)`,
      ],
      [
        await runTask("admin", ["user", "list", "--store", typo]),
        `keygate admin: Invalid --store "${shown}": ${expected}`,
      ],
      [
        await runTask("admin", ["user", "add", "a@example.org"], {
          env: { KEYGATE_STORE: `postgress://keygate:kg-pass@127.0.0.1:${port}/keygate` },
          stdin: `${PASSWORD}\n`,
        }),
        `keygate admin: Invalid KEYGATE_STORE "postgress://keygate:***@127.0.0.1:${port}/keygate": ` +
        "it is a URL (postgress://) of a kind keygate does not know; expected " +
        "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, sqlite:PATH or a file path",
      ],
      [
        await runTask("start", ["--port", "0", "--db", `postgres://keygate:kg-pass@h/keygate`]),
        'keygate: Invalid --db "postgres://keygate:***@h/keygate": it is a store URL: give it ' +
        "with --store (--db takes a file path) (see --help)",
      ],
    ];
    for (const [run, line] of runs) {
      assert.equal(run.code, 2, run.err);
      assertOneLine(run, line);
      assert.doesNotMatch(run.out + run.err, /kg-pass/);
    }
    assert.equal(snapshotDb(), before, "nothing written to ./db/");
    for (const name of ["postgres", "postgres:", "postgress:"]) {
      assert.throws(() => Deno.statSync(`${REPO}/${name}`), Deno.errors.NotFound, name);
    }
  },
});

Deno.test({
  name:
    "[pg task] KEYGATE_STORE in the environment and --db on the command line: refused, saying where each came from",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("conflict");
    const env = { KEYGATE_STORE: url };
    const start = await runTask("start", ["--port", "0", "--db", "db/other.sqlite3"], { env });
    assert.equal(start.code, 2);
    assertOneLine(
      start,
      "keygate: Invalid store settings: give --store or --db, not both (KEYGATE_STORE is set " +
        "in the environment; --db is on the command line) (see --help)",
    );
    const cli = await runTask("admin", ["user", "list", "--db", "db/other.sqlite3"], { env });
    assert.equal(cli.code, 2);
    assertOneLine(
      cli,
      "keygate admin: Give --store or --db, not both (KEYGATE_STORE is set in the environment; " +
        "--db is on the command line) (see deno task admin help)",
    );
    // The variable alone (the recipe's EnvironmentFile and an ExecStart without --db) works.
    const list = await runTask("admin", ["db", "migrate"], { env });
    assert.equal(list.code, 0, list.err);
  },
});

Deno.test({
  name:
    "[pg task] a server without TLS and sslmode=require (explicit, or the default for a non-loopback host): the error says so and how to set sslmode",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("tls");
    const required = url.replace("sslmode=disable", "sslmode=require");
    const hint = "Client network socket disconnected before secure TLS connection was " +
      "established; the server does not accept TLS, which sslmode=require asks for (without " +
      "sslmode in the URL: require for any host but localhost): turn ssl on in the server's " +
      "postgresql.conf, or add ?sslmode=disable to the URL if the network between is private";
    const cli = await runTask("admin", ["user", "list", "--store", required]);
    assert.equal(cli.code, 1);
    assertOneLine(cli, `keygate admin: Cannot open the store ${required}: ${hint}`);
    const start = await runTask("start", ["--port", "0", "--store", required]);
    assert.equal(start.code, 1);
    assertOneLine(start, `keygate: Cannot open the store ${required}: ${hint}`);
    // No sslmode and a host that is not one of localhost, 127.0.0.1, [::1]: this cluster
    // through its IPv4-mapped IPv6 address (when this system has IPv6 sockets at all).
    let mapped = true;
    try {
      (await Deno.connect({ hostname: "::ffff:127.0.0.1", port: cluster!.port })).close();
    } catch {
      mapped = false;
    }
    if (mapped) {
      const remote = url.replace("127.0.0.1", "[::ffff:127.0.0.1]").replace("?sslmode=disable", "");
      const shown = `${remote.replace("[::ffff:127.0.0.1]", "[::ffff:7f00:1]")}?sslmode=require`;
      const run = await runTask("admin", ["user", "list", "--store", remote]);
      assert.equal(run.code, 1);
      assertOneLine(run, `keygate admin: Cannot open the store ${shown}: ${hint}`);
    }
  },
});

Deno.test({
  name:
    "[pg task] password authentication: the error says whether the URL or PGPASSWORD gave the password; PGPASSWORD works",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("pw");
    const database = new URL(url.replace("postgres:", "http:")).pathname.slice(1);
    const secret = "pw-Zq8vT3";
    // A role that must give a password over TCP (the cluster trusts everyone else).
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await sql.unsafe(`CREATE ROLE pwuser LOGIN PASSWORD '${secret}'`);
      await sql.unsafe(`ALTER DATABASE ${database} OWNER TO pwuser`);
      const hba = `${cluster!.dir}/data/pg_hba.conf`;
      const lines = await Deno.readTextFile(hba);
      await Deno.writeTextFile(hba, `host all pwuser 127.0.0.1/32 scram-sha-256\n${lines}`);
      await sql`SELECT pg_reload_conf()`;
    } finally {
      await sql.end();
    }
    const store = `postgres://pwuser@127.0.0.1:${cluster!.port}/${database}`;
    const shown = `${store}?sslmode=disable`;
    const failed = 'password authentication failed for user "pwuser"';
    const cases: [string, Record<string, string>, string][] = [
      [
        store,
        { PGPASSWORD: "" },
        `${failed}; the URL has no password and PGPASSWORD is not set: put the password in ` +
        "the URL (postgres://USER:PASSWORD@HOST/DATABASE, percent-encoded) or in PGPASSWORD",
      ],
      [
        store,
        { PGPASSWORD: "wrong-Kx7" },
        `${failed}; the URL has no password, so PGPASSWORD's was used: check PGPASSWORD`,
      ],
      [
        store.replace("pwuser@", "pwuser:wrong-Kx7@"),
        { PGPASSWORD: "" },
        `${failed}; check the password in the URL (percent-encode @, : and / in it)`,
      ],
    ];
    for (const [at, env, reason] of cases) {
      const run = await runTask("admin", ["user", "list", "--store", at], { env });
      assert.equal(run.code, 1, run.err);
      const display = at.includes(":wrong-Kx7@") ? shown.replace("pwuser@", "pwuser:***@") : shown;
      assertOneLine(run, `keygate admin: Cannot open the store ${display}: ${reason}`);
      assert.doesNotMatch(run.err, /wrong-Kx7|pw-Zq8vT3/);
    }
    const ok = await runTask("admin", ["db", "migrate", "--store", store], {
      env: { PGPASSWORD: secret },
    });
    assert.equal(ok.code, 0, ok.err);
  },
});

Deno.test({
  name: "[pg task] a missing database and a port where nothing listens: the reason and what to do",
  ignore,
  async fn() {
    const missing = cluster!.urlOf("nosuchdb");
    const run = await runTask("admin", ["user", "list", "--store", missing]);
    assert.equal(run.code, 1);
    assertOneLine(
      run,
      `keygate admin: Cannot open the store ${missing}: database "nosuchdb" does not exist; ` +
        "create the database first: createdb --owner keygate nosuchdb",
    );
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (listener.addr as Deno.NetAddr).port;
    listener.close();
    const nobody = `postgres://keygate@127.0.0.1:${port}/keygate?sslmode=disable`;
    const start = await runTask("start", ["--port", "0", "--store", nobody]);
    assert.equal(start.code, 1);
    assertOneLine(
      start,
      `keygate: Cannot open the store ${nobody}: connect ECONNREFUSED 127.0.0.1:${port}; ` +
        `nothing accepts connections at 127.0.0.1:${port}: check that PostgreSQL runs and ` +
        "listens on that address and port (listen_addresses, port)",
    );
  },
});

Deno.test({ name: "[pg task] stop the cluster", ignore, fn: () => cluster!.stop() });
