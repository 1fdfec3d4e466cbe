/**
 * The PostgreSQL operator's path as an operator types it (issue 29):
 * `deno task admin …` and `deno task start --store …` as child processes,
 * with deno.json's own flags, against a throwaway cluster. Each refusal is
 * one line, names where the setting came from, says what to do and never
 * shows a password; nothing is written to ./db/ (or the working directory)
 * when the store is PostgreSQL. The refusals are in operator_refusals_test.ts.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { startTestCluster } from "../../_helpers/postgres_cluster.ts";
import { type ServerProcess, startServerProcess } from "../../_helpers/server_process.ts";
import { runTask, snapshotDb, taskAsDenoRun, type TaskRun } from "../../_helpers/task.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;
const PASSWORD = "correct horse battery";
const CURRENT = "/api/secure/userservice/tokens/current";
/** Requests as the proxy in front of a --behind-proxy server sends them. */
const PROXIED = { "x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.9" };

/** `deno task admin ARGS --store URL`, which must succeed. */
async function admin(url: string, args: string[], stdin = ""): Promise<TaskRun> {
  const run = await runTask("admin", [...args, "--store", url], { stdin });
  assert.equal(run.code, 0, `admin ${args.join(" ")}: ${run.err}`);
  return run;
}

async function login(origin: string, apiKey: string): Promise<Response> {
  return await fetch(`${origin}/api/userservice/tokens`, {
    method: "POST",
    headers: { ...PROXIED, "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({
      auth_request: { user: { email: "alice@example.org", password: PASSWORD }, api_key: apiKey },
    }),
  });
}

Deno.test({
  name:
    "[pg task] deno task admin … --store URL as typed: db migrate, user add, key create, user list, operator create, token revoke-all",
  ignore,
  sanitizeResources: false, // the server's pipes close after its exit, at the end of the test
  async fn() {
    const url = await cluster!.createDatabase("task_admin");
    const before = snapshotDb();
    assert.match((await admin(url, ["db", "migrate"])).out, /Schema is up to date/);
    assert.match(
      (await admin(url, ["user", "add", "alice@example.org"], `${PASSWORD}\n`)).out,
      /^Added user alice@example\.org \(id 1/,
    );
    const apiKey = (await admin(url, ["key", "create", "alice@example.org"])).out.trim()
      .split("\n").at(-1)!;
    assert.match((await admin(url, ["user", "list"])).out, /1\s+alice@example\.org\s+default/);
    const operator = await admin(url, ["operator", "create", "ann", "--role", "write"]);
    assert.match(operator.out, /ann/);

    // The server on the same database, as typed: the CLI's password and key log in.
    const server = await startServerProcess(url, ["--behind-proxy"], { task: true });
    try {
      const health = await fetch(`${server.origin}/healthz`);
      assert.equal(health.status, 200);
      await health.body?.cancel();
      const issued = await login(server.origin, apiKey);
      assert.equal(issued.status, 200);
      const token = (await issued.json()).auth_response.access_token;
      const headers = { ...PROXIED, "x-api-key": apiKey, authorization: `Bearer ${token}` };
      const before = await fetch(`${server.origin}${CURRENT}`, { headers });
      assert.equal(before.status, 200);
      await before.body?.cancel();
      // revoke-all from another process reaches the server (notification, else the poll).
      assert.match((await admin(url, ["token", "revoke-all", "alice@example.org"])).out, /1/);
      let status = 0;
      for (let waited = 0; waited < 2000 && status !== 401; waited += 20) {
        const after = await fetch(`${server.origin}${CURRENT}`, { headers });
        status = after.status;
        await after.body?.cancel();
        if (status !== 401) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(status, 401, "the revoked token is refused");
    } finally {
      assert.equal((await server.stop()).code, 0);
    }

    // What the commands stored.
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const users = await sql`SELECT email, tokens_valid_from FROM users`;
      assert.equal(users.length, 1);
      assert.equal(users[0].email, "alice@example.org");
      assert.ok(Number(users[0].tokens_valid_from) > 0, "revoke-all set the cutoff");
      const keys = await sql`SELECT count(*)::int AS n FROM api_keys WHERE revoked_at IS NULL`;
      assert.equal(keys[0].n, 1);
      const operators = await sql`SELECT name, role FROM operators WHERE revoked_at IS NULL`;
      assert.deepEqual([...operators].map((row) => [row.name, row.role]), [["ann", "write"]]);
      const actions = (await sql`SELECT action FROM audit_log ORDER BY id`).map((r) => r.action);
      for (
        const action of [
          "user.added",
          "key.created",
          "operator.created",
          "token.issued",
          "tokens.revoked",
        ]
      ) {
        assert.ok(actions.includes(action), `${action} in ${actions}`);
      }
    } finally {
      await sql.end();
    }
    assert.equal(snapshotDb(), before, "nothing written to ./db/");
  },
});

Deno.test({
  name:
    "[pg task] deno task start --store URL serves HTTPS with a self-signed pair in memory, writing nothing to ./db/",
  ignore,
  sanitizeResources: false,
  async fn() {
    const url = await cluster!.createDatabase("task_start");
    const before = snapshotDb();
    const server = await startServerProcess(url, [], { task: true });
    try {
      const warning = server.lines.find((line) => line.includes("self-signed"))!;
      assert.match(JSON.parse(warning).msg, /kept in memory only/);
      const fingerprint: string = JSON.parse(warning).sha256_fingerprint;
      assert.match(fingerprint, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
      const listening = JSON.parse(server.lines.find((l) => l.includes("keygate listening"))!);
      assert.equal(listening.db, url);
      const port = new URL(server.origin).port;
      // The certificate is served as logged (openssl, when installed, reads its fingerprint).
      const curl = await new Deno.Command("curl", {
        args: ["-sk", `https://127.0.0.1:${port}/healthz`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(new TextDecoder().decode(curl.stdout), '{"status":"ok"}');
      const openssl = await new Deno.Command("sh", {
        args: [
          "-c",
          `command -v openssl >/dev/null || exit 3; openssl s_client -connect 127.0.0.1:${port} ` +
          "</dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256",
        ],
        stdout: "piped",
      }).output();
      if (openssl.code !== 3) {
        assert.equal(new TextDecoder().decode(openssl.stdout).trim().split("=")[1], fingerprint);
      }
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
    assert.equal(snapshotDb(), before, "nothing written to ./db/");
  },
});

/**
 * The command that runs the server as `user` would without CAP_DAC_OVERRIDE: as root, setpriv
 * drops the capabilities that let root write anywhere, so that a directory's mode 0555 binds.
 */
function withoutOverride(argv: string[]): string[] | undefined {
  if (Deno.uid() !== 0) return argv;
  const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((path) => {
    try {
      return Deno.statSync(path).isFile;
    } catch {
      return false;
    }
  });
  if (setpriv === undefined) return undefined;
  const caps = "-dac_override,-dac_read_search,-fowner";
  return [setpriv, `--inh-caps=${caps}`, `--bounding-set=${caps}`, ...argv];
}

Deno.test({
  name:
    "[pg task] the N-instance recipe: KEYGATE_STORE from an environment file, no --db, a read-only working directory: starts, writes nothing there",
  ignore,
  sanitizeResources: false,
  async fn() {
    const url = await cluster!.createDatabase("recipe");
    const cwd = await Deno.makeTempDir({ prefix: "keygate-readonly-" });
    try {
      // docs/postgres.md's /etc/keygate/keygate.env, on this machine.
      const envFile = [
        `KEYGATE_STORE=${url}`,
        "KEYGATE_BEHIND_PROXY=on",
        "KEYGATE_HOSTNAME=127.0.0.1",
        "KEYGATE_PORT=0",
        "KEYGATE_TRUSTED_PROXIES=127.0.0.1/32",
        "KEYGATE_ADMIN=on",
        "KEYGATE_ADMIN_PORT=0",
      ].join("\n");
      const env = Object.fromEntries(
        envFile.split("\n").map((line) => {
          const at = line.indexOf("=");
          return [line.slice(0, at), line.slice(at + 1)];
        }),
      );
      await Deno.chmod(cwd, 0o555);
      // The start task's own flags, from a directory that is not the repository (as the
      // compiled binary under systemd, whose working directory is /).
      const command = withoutOverride([Deno.execPath(), ...taskAsDenoRun("start")]);
      const probe = withoutOverride(["sh", "-c", "touch probe"]);
      if (command !== undefined && probe !== undefined) {
        const [program, ...args] = probe;
        const touched = await new Deno.Command(program, { args, cwd, stderr: "null" }).output();
        assert.equal(touched.success, false, "the working directory is read-only to the server");
      }
      const server: ServerProcess = await startServerProcess("", [], {
        command: command ?? [Deno.execPath(), ...taskAsDenoRun("start")],
        cwd,
        env,
        ownPort: true,
        admin: true,
      });
      try {
        const listening = JSON.parse(server.lines.find((l) => l.includes("keygate listening"))!);
        assert.equal(listening.db, url);
        assert.match(server.adminOrigin!, /^https:\/\/127\.0\.0\.1:\d+$/);
        const warning = server.lines.find((line) => line.includes("self-signed"))!;
        assert.match(JSON.parse(warning).msg, /kept in memory only/);
        const health = await fetch(`${server.origin}/healthz`);
        assert.equal(health.status, 200);
        await health.body?.cancel();
      } finally {
        assert.equal((await server.stop()).code, 0);
      }
      assert.deepEqual([...Deno.readDirSync(cwd)], [], "nothing created in the working directory");
    } finally {
      await Deno.chmod(cwd, 0o755);
      await Deno.remove(cwd, { recursive: true });
    }
  },
});

Deno.test({ name: "[pg task] stop the cluster", ignore, fn: () => cluster!.stop() });
