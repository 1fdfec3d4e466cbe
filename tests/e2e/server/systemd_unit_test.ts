/**
 * The systemd unit of docs/deploy.md: it passes `systemd-analyze verify`
 * (skipped where systemd-analyze is not installed, except in CI), and its
 * `ExecStart` command line, run with the unit's `WorkingDirectory`,
 * `Environment=` lines and an environment file from the docs (deploy.md's
 * for SQLite, postgres.md's for PostgreSQL on a throwaway cluster), starts a
 * server that answers `/healthz` and stops on SIGTERM.
 */
import assert from "node:assert/strict";
import { dirname } from "node:path";
import postgres from "postgres";
import { readDocBlocks } from "../../_helpers/doc_blocks.ts";
import { POSTGRES_SKIP, startPostgres } from "../../_helpers/postgres_cluster.ts";
import { hasCommand } from "../../_helpers/reverse_proxy.ts";
import { findFreePort } from "../../_helpers/free_port.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const IN_CI = (Deno.env.get("CI") ?? "") !== "" && Deno.env.get("CI") !== "false";

/** The `ini` block of `page` whose first line names `file`, without that line. */
function readIniBlock(page: string, file: string): string {
  const block = readDocBlocks(Deno.readTextFileSync(`${ROOT}${page}`))
    .find((b) => b.language === "ini" && b.body.startsWith(`# ${file}`));
  assert.ok(block, `${page} has an ini block starting with "# ${file}"`);
  return block.body;
}

const UNIT = readIniBlock("docs/deploy.md", "/etc/systemd/system/keygate.service");

/** A unit's `[Service]` settings, continuation lines joined; repeated keys in order. */
function readServiceSettings(unit: string): [string, string][] {
  const settings: [string, string][] = [];
  let section = "";
  for (const line of unit.replace(/\\\n\s*/g, " ").split("\n")) {
    const header = /^\[(\w+)\]$/.exec(line.trim());
    if (header) section = header[1];
    const setting = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (setting && section === "Service") settings.push([setting[1], setting[2].trim()]);
  }
  return settings;
}

/** An environment file as systemd reads it: `KEY=VALUE` lines, `#` comments. */
function readEnvironmentFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const setting = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (setting) env[setting[1]] = setting[2];
  }
  return env;
}

Deno.test({
  name: "docs/deploy.md's systemd unit passes systemd-analyze verify",
  ignore: !IN_CI && !hasCommand("systemd-analyze"),
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "keygate-unit-" });
    try {
      const settings = readServiceSettings(UNIT);
      const execStart = settings.find(([key]) => key === "ExecStart")?.[1];
      assert.equal(execStart, "/usr/local/bin/deno task start");
      // verify wants the executable to exist; Deno need not be installed there.
      Deno.writeTextFileSync(
        `${dir}/keygate.service`,
        UNIT.replace("ExecStart=/usr/local/bin/deno ", "ExecStart=/bin/true "),
      );
      const output = await new Deno.Command("systemd-analyze", {
        args: ["verify", `${dir}/keygate.service`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(output.stdout) +
        new TextDecoder().decode(output.stderr);
      assert.equal(output.code, 0, text);
      assert.equal(text.trim(), "", "no unknown key or bad value");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test("docs/deploy.md's systemd unit takes every setting from its environment file", () => {
  const settings = readServiceSettings(UNIT);
  const execStart = settings.find(([key]) => key === "ExecStart")![1];
  // A --db or --store here would conflict with the file's KEYGATE_STORE (issue 29.4).
  assert.doesNotMatch(execStart, /--(db|store)\b/);
  assert.deepEqual(
    settings.filter(([key]) => key === "EnvironmentFile").map(([, value]) => value),
    ["/etc/keygate/keygate.env"],
  );
});

/**
 * Runs the unit's ExecStart as systemd would (its working directory, a clean
 * environment of its `Environment=` lines and `envFile`), with the docs'
 * production paths and ports moved into `dir`; resolves once `/healthz`
 * answered, then stops it with SIGTERM and returns its log.
 */
async function startUnit(
  envFile: Record<string, string>,
  dir: string,
  options: { writesWorkDir?: boolean } = {},
): Promise<string> {
  const settings = readServiceSettings(UNIT);
  const [program, ...args] = settings.find(([key]) => key === "ExecStart")![1].split(/\s+/);
  assert.equal(program, "/usr/local/bin/deno");
  const workingDirectory = settings.find(([key]) => key === "WorkingDirectory")![1];
  assert.equal(workingDirectory, "/opt/keygate", "the directory the install steps copy to");
  const unitEnv = Object.fromEntries(
    settings.filter(([key]) => key === "Environment").map(([, value]) => value.split("=", 2)),
  );
  assert.equal(unitEnv.DENO_DIR, "/opt/keygate/.deno");
  const port = findFreePort();
  const env: Record<string, string> = {
    // Deno's cache here is the test's own; the inner `deno run` is found on PATH.
    ...(Deno.env.get("DENO_DIR") ? { DENO_DIR: Deno.env.get("DENO_DIR")! } : {}),
    HOME: Deno.env.get("HOME") ?? "/root",
    PATH: `${dirname(Deno.execPath())}:/usr/bin:/bin`,
    NO_COLOR: "1",
  };
  for (const [key, value] of Object.entries(envFile)) {
    env[key] = value.replaceAll("/var/lib/keygate", dir);
  }
  env.KEYGATE_PORT = String(port);
  if (env.KEYGATE_METRICS_PORT !== undefined) env.KEYGATE_METRICS_PORT = String(findFreePort());
  // /opt/keygate: a copy of the checkout (its files linked), read-only under ProtectSystem=strict.
  const workDir = `${dir}/opt-keygate`;
  Deno.mkdirSync(workDir);
  for (const entry of Deno.readDirSync(ROOT)) {
    if ([".git", "db", "dist"].includes(entry.name)) continue;
    Deno.symlinkSync(`${ROOT}${entry.name}`, `${workDir}/${entry.name}`);
  }
  const shipped = [...Deno.readDirSync(workDir)].map((entry) => entry.name).sort();
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd: workDir,
    clearEnv: true,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  let healthy = false;
  try {
    for (let i = 0; i < 100 && !healthy; i++) {
      try {
        const response = await fetch(`http://127.0.0.1:${port}/healthz`);
        healthy = response.status === 200 && (await response.json()).status === "ok";
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } finally {
    try {
      child.kill("SIGTERM");
    } catch {
      // It exited already.
    }
  }
  const { code, stdout, stderr } = await output;
  const log = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
  assert.ok(healthy, `the unit's ExecStart did not answer /healthz:\n${log}`);
  assert.equal(code, 0, `stopped by SIGTERM, it exits 0:\n${log}`);
  assert.match(log, /"msg":"stopped"/);
  if (!options.writesWorkDir) {
    assert.deepEqual(
      [...Deno.readDirSync(workDir)].map((entry) => entry.name).sort(),
      shipped,
      "nothing written to the working directory (read-only under ProtectSystem=strict)",
    );
  }
  return log;
}

Deno.test("[server] the systemd unit's ExecStart starts with deploy.md's SQLite environment file", async () => {
  const envFile = readEnvironmentFile(readIniBlock("docs/deploy.md", "/etc/keygate/keygate.env"));
  assert.equal(envFile.KEYGATE_DB, "/var/lib/keygate/keygate.sqlite3");
  assert.equal(envFile.KEYGATE_STORE, undefined);
  const dir = Deno.makeTempDirSync({ prefix: "keygate-unit-" });
  try {
    await startUnit(envFile, dir);
    assert.ok(Deno.statSync(`${dir}/keygate.sqlite3`).isFile, "the database is in KEYGATE_DB");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test({
  name: "[server] the systemd unit's ExecStart starts with postgres.md's environment file",
  ignore: POSTGRES_SKIP !== false,
}, async () => {
  const envFile = readEnvironmentFile(readIniBlock("docs/postgres.md", "/etc/keygate/keygate.env"));
  assert.match(envFile.KEYGATE_STORE, /^postgres:\/\/keygate:[^@]+@10\.0\.0\.5:5432\/keygate\?/);
  assert.equal(envFile.KEYGATE_DB, undefined);
  const cluster = await startPostgres();
  const dir = Deno.makeTempDirSync({ prefix: "keygate-unit-" });
  try {
    const url = await cluster.createDatabase("unit");
    // This machine stands in for the hosts: the database and the instance's address are local.
    const log = await startUnit(
      { ...envFile, KEYGATE_STORE: url, KEYGATE_HOSTNAME: "127.0.0.1" },
      dir,
    );
    assert.doesNotMatch(log, /keygate\.sqlite3/, "no SQLite file involved");
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const [{ count }] = await sql`SELECT count(*)::int AS count FROM keygate_migrations`;
      assert.ok(count > 0, "the instance migrated the PostgreSQL database");
    } finally {
      await sql.end();
    }
  } finally {
    await cluster.stop();
    Deno.removeSync(dir, { recursive: true });
  }
});

const BACKUP_SERVICE = readIniBlock("docs/deploy.md", "/etc/systemd/system/keygate-backup.service");
const BACKUP_TIMER = readIniBlock("docs/deploy.md", "/etc/systemd/system/keygate-backup.timer");

Deno.test({
  name: "docs/deploy.md's backup service and timer pass systemd-analyze verify",
  ignore: !IN_CI && !hasCommand("systemd-analyze"),
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "keygate-unit-" });
    try {
      Deno.writeTextFileSync(`${dir}/keygate-backup.service`, BACKUP_SERVICE);
      Deno.writeTextFileSync(`${dir}/keygate-backup.timer`, BACKUP_TIMER);
      const output = await new Deno.Command("systemd-analyze", {
        args: ["verify", `${dir}/keygate-backup.service`, `${dir}/keygate-backup.timer`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(output.stdout) +
        new TextDecoder().decode(output.stderr);
      assert.equal(output.code, 0, text);
      assert.equal(text.trim(), "", "no unknown key or bad value");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

/** A command line of a unit as the program sees it: `$$` and `%%` unescaped. */
function unescapeUnitCommand(line: string): string {
  return line.replaceAll("$$", "$").replaceAll("%%", "%");
}

Deno.test("[server] the backup service's commands write a checked backup and delete old ones", async () => {
  const settings = readServiceSettings(BACKUP_SERVICE);
  const get = (key: string) => settings.find(([k]) => k === key)?.[1];
  assert.equal(get("EnvironmentFile"), "/etc/keygate/keygate.env");
  assert.equal(get("WorkingDirectory"), "/opt/keygate");
  const script = /^\/bin\/sh -c '(.*)'$/.exec(unescapeUnitCommand(get("ExecStart")!))?.[1];
  assert.ok(script, "ExecStart is /bin/sh -c '…'");
  const dir = Deno.makeTempDirSync({ prefix: "keygate-unit-" });
  const backups = `${dir}/backups`;
  Deno.mkdirSync(backups);
  try {
    const envFile = readEnvironmentFile(readIniBlock("docs/deploy.md", "/etc/keygate/keygate.env"));
    const env: Record<string, string> = {
      HOME: Deno.env.get("HOME") ?? "/root",
      PATH: `${dirname(Deno.execPath())}:/usr/bin:/bin`,
      NO_COLOR: "1",
      ...(Deno.env.get("DENO_DIR") ? { DENO_DIR: Deno.env.get("DENO_DIR")! } : {}),
    };
    for (const [key, value] of Object.entries(envFile)) {
      env[key] = value.replaceAll("/var/lib/keygate", dir);
    }
    const add = await new Deno.Command(Deno.execPath(), {
      args: ["task", "admin", "user", "add", "backup@example.org"],
      cwd: ROOT,
      clearEnv: true,
      env,
      stdin: "piped",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const writer = add.stdin.getWriter();
    await writer.write(new TextEncoder().encode("backup s3cret\n"));
    await writer.close();
    assert.equal((await add.output()).code, 0);
    // A backup from three weeks ago, with the -shm file its check left, which ExecStartPost deletes.
    const weeksAgo = new Date(Date.now() - 21 * 86_400_000);
    for (
      const old of ["keygate-20200101T031700Z.sqlite3", "keygate-20200101T031700Z.sqlite3-shm"]
    ) {
      Deno.writeTextFileSync(`${backups}/${old}`, "");
      Deno.utimeSync(`${backups}/${old}`, weeksAgo, weeksAgo);
    }
    const run = async (program: string, args: string[]) => {
      const output = await new Deno.Command(program, {
        args,
        cwd: ROOT,
        clearEnv: true,
        env,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(output.stdout) +
        new TextDecoder().decode(output.stderr);
      assert.equal(output.code, 0, text);
      return text;
    };
    const inSandbox = (text: string) =>
      text.replaceAll("/var/backups/keygate", backups)
        .replaceAll("/usr/local/bin/deno", Deno.execPath());
    const out = await run("/bin/sh", ["-c", inSandbox(script)]);
    assert.match(out, /Wrote backup .*keygate-\d{8}T\d{6}Z\.sqlite3: 1 user\(s\), .*integrity ok/);
    const [findProgram, ...findArgs] = inSandbox(unescapeUnitCommand(get("ExecStartPost")!))
      .split(/\s+/);
    await run(findProgram, findArgs);
    const left = [...Deno.readDirSync(backups)].map((entry) => entry.name);
    assert.ok(left.every((name) => !name.includes("2020")), `old backups deleted: ${left}`);
    assert.ok(left.some((name) => /^keygate-\d{8}T\d{6}Z\.sqlite3$/.test(name)), `${left}`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
