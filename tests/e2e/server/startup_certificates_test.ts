/**
 * The server's key and certificate at start-up, as an operator meets them: an unreadable file
 * says permission denied and for whom, `--self-signed-dir` keeps its pair across restarts, and
 * `--db :memory:` keeps the pair in memory.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { generateSelfSigned } from "../../../src/platform/tls.ts";
import { startServerProcess } from "../../_helpers/server_process.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { assertOneLine, PERMISSIONS, start } from "../../_helpers/server_start.ts";

/**
 * Runs main.ts as a user whom file modes bind: as root, without the capabilities that let root
 * read and write anything (setpriv); `undefined` when that cannot be arranged.
 */
async function startBound(args: string[]) {
  let prefix: string[] = [];
  if (Deno.uid() === 0) {
    if (!existsSync("/usr/bin/setpriv")) return undefined;
    const caps = "-dac_override,-dac_read_search,-fowner";
    prefix = ["/usr/bin/setpriv", `--inh-caps=${caps}`, `--bounding-set=${caps}`];
  }
  const [program, ...rest] = [...prefix, Deno.execPath()];
  const output = await new Deno.Command(program, {
    args: [...rest, "run", ...PERMISSIONS, "main.ts", "--hostname", "127.0.0.1", ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: output.code, err: new TextDecoder().decode(output.stderr) };
}

Deno.test("[server] an unreadable --key or --cert says permission denied and for whom, exit 1 (issue 29)", async () => {
  using db = tempDbPath();
  const pair = await generateSelfSigned();
  const cert = `${db.dir}/cert.pem`;
  const key = `${db.dir}/key.pem`;
  Deno.writeTextFileSync(cert, pair.cert);
  Deno.writeTextFileSync(key, pair.key);
  Deno.chmodSync(key, 0o000);
  const result = await startBound(["--db", db.path, "--port", "0", "--cert", cert, "--key", key]);
  if (result === undefined) return; // root without setpriv: mode bits cannot be made to bind
  assert.equal(result.code, 1);
  assertOneLine(
    result.err,
    new RegExp(
      `^keygate: Cannot read --key "${key}": permission denied for (user \\S+ \\()?uid ${Deno.uid()}\\)?; ` +
        "make the file readable by the user keygate runs as \\(chown or chmod\\), or run keygate " +
        "as a user that can read it$",
    ),
  );
  assert.doesNotMatch(result.err, /give the path of a PEM file/);
});

Deno.test("[server] --self-signed-dir keeps the pair there across restarts; an unusable one is one line (issue 29)", async () => {
  using db = tempDbPath();
  const dir = `${db.dir}/tls/self-signed`;
  const first = await startServerProcess(db.path, ["--self-signed-dir", dir]);
  const warning = (server: typeof first) =>
    JSON.parse(server.lines.find((line) => line.includes("self-signed"))!);
  const shown = warning(first);
  assert.equal(shown.msg.includes(`(${dir}/keygate-cert.pem)`), true, shown.msg);
  assert.equal((await first.stop()).code, 0);
  assert.equal(Deno.statSync(`${dir}/keygate-key.pem`).mode! & 0o777, 0o600);
  assert.equal(Deno.statSync(dir).mode! & 0o777, 0o700);
  assert.equal(existsSync(`${db.dir}/keygate-cert.pem`), false, "not beside the database");
  const second = await startServerProcess(db.path, ["--self-signed-dir", dir]);
  assert.equal(warning(second).sha256_fingerprint, shown.sha256_fingerprint, "reused");
  assert.equal((await second.stop()).code, 0);

  // Under a regular file no directory can be made, whoever runs the test (even root).
  Deno.writeTextFileSync(`${db.dir}/file`, "");
  const blocked = await start([
    "--db",
    db.path,
    "--port",
    "0",
    "--self-signed-dir",
    `${db.dir}/file/x`,
  ]);
  assert.equal(blocked.code, 1);
  assertOneLine(
    blocked.err,
    `keygate: Cannot create --self-signed-dir "${db.dir}/file/x": a part of the path is not a ` +
      "directory; choose a writable directory or fix the permissions",
  );
  // A directory this user may not write: the pair cannot be kept there.
  const locked = `${db.dir}/locked`;
  Deno.mkdirSync(locked, { mode: 0o555 });
  Deno.chmodSync(locked, 0o555);
  const unwritable = await startBound([
    "--db",
    db.path,
    "--port",
    "0",
    "--self-signed-dir",
    locked,
  ]);
  if (unwritable !== undefined) {
    assert.equal(unwritable.code, 1);
    assertOneLine(
      unwritable.err,
      `keygate: Cannot keep the self-signed certificate in --self-signed-dir "${locked}": ` +
        "permission denied; make the directory writable, choose another --self-signed-dir, " +
        "or give --cert and --key",
    );
  }
});

Deno.test("[server] --db :memory: keeps its self-signed pair in memory, writing nothing in the working directory", async () => {
  using db = tempDbPath();
  const server = await startServerProcess(":memory:", [], {
    command: [Deno.execPath(), "run", ...PERMISSIONS, `${Deno.cwd()}/main.ts`],
    cwd: db.dir,
  });
  try {
    const warning = JSON.parse(server.lines.find((line) => line.includes("self-signed"))!);
    assert.match(warning.msg, /kept in memory only/);
  } finally {
    assert.equal((await server.stop()).code, 0);
  }
  assert.deepEqual([...Deno.readDirSync(db.dir)], []);
});
