/**
 * Every shell command the documentation shows, run as a user runs it: each
 * `sh runnable` block is executed with bash (its `deno task …` commands as
 * child processes) in a sandbox clone, in page order, as a newcomer would
 * paste it, with the outputs it shows checked; docs/postgres.md's against a
 * throwaway PostgreSQL cluster. docs_test.ts holds the site's static checks.
 */
import assert from "node:assert/strict";
import { dirname } from "node:path";
import { existsSync, rmSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import postgres from "postgres";
import { migratePostgres } from "../../src/store/postgres/migrate.ts";
import { POSTGRES_MIGRATIONS } from "../../src/store/postgres/schema.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { MIGRATIONS } from "../../src/store/sqlite/migrations.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { readShellMark, runnableBlocks } from "../_helpers/doc_blocks.ts";
import {
  POSTGRES_SKIP,
  type PostgresCluster,
  startPostgres,
} from "../_helpers/postgres_cluster.ts";
import { DOCS, read, ROOT } from "../_helpers/docs_site.ts";
import { findFreePort } from "../_helpers/free_port.ts";

/** The ports the docs show, each replaced by a free one in the sandbox. */
const DOC_PORTS = [8443, 8080, 8081, 8082, 9444, 9464];
/** The production directories the docs show, each a directory of the sandbox. */
const DOC_DIRS = ["/var/lib/keygate", "/var/backups/keygate", "/etc/keygate"];
/** The PostgreSQL superuser's password on the docs' throwaway cluster. */
const PG_SUPERUSER_PASSWORD = "pg-super-docs";

/**
 * A fresh clone to paste commands into: the tracked sources linked, without
 * `db/` (a clone has none), so the blocks make and use a temporary database,
 * and the production directories the docs name made inside it.
 */
function makeSandbox(): string {
  const dir = Deno.makeTempDirSync({ prefix: "keygate-docs-" });
  for (const entry of Deno.readDirSync(ROOT)) {
    if ([".git", "db", "dist"].includes(entry.name)) continue;
    Deno.symlinkSync(`${ROOT}${entry.name}`, `${dir}/${entry.name}`);
  }
  for (const path of DOC_DIRS) Deno.mkdirSync(`${dir}${path}`, { recursive: true });
  return dir;
}

/** Where a page's blocks run: the sandbox, its ports, its PostgreSQL cluster if any. */
interface Sandbox {
  dir: string;
  /** Each port of {@link DOC_PORTS} and 5432 (PostgreSQL) → the one used here. */
  ports: Map<number, number>;
  postgres?: PostgresCluster;
}

/** The block as it runs in the sandbox: its ports and production paths moved there. */
function toSandbox(text: string, sandbox: Sandbox): string {
  let result = text;
  for (const [from, to] of sandbox.ports) {
    result = result.replace(new RegExp(`(?<![0-9])${from}(?![0-9])`, "g"), String(to));
  }
  for (const path of DOC_DIRS) result = result.replaceAll(path, `${sandbox.dir}${path}`);
  return result;
}

/** Output as the docs show it: the sandbox's directories and ports back to the docs' ones. */
function fromSandbox(text: string, sandbox: Sandbox): string {
  let result = text;
  for (const path of DOC_DIRS) result = result.replaceAll(`${sandbox.dir}${path}`, path);
  for (const [from, to] of sandbox.ports) {
    result = result.replace(new RegExp(`(?<![0-9])${to}(?![0-9])`, "g"), String(from));
  }
  return result;
}

/**
 * Runs a block with bash in the sandbox, as if pasted into the shell that ran
 * the page's earlier blocks: the variables they set are set again.
 */
async function runBlock(
  sandbox: Sandbox,
  block: string,
  env: Record<string, string> = {},
) {
  const state = `${sandbox.dir}/.docs-shell-variables`;
  // The shell's own variables are those it has before the state is read; every other one, and
  // every exported one, is written back when the block ends (also when it fails).
  const script = `__docs_own=" $(compgen -v | tr '\\n' ' ') "\n` +
    `if [ -f '${state}' ]; then source '${state}'; fi\n` +
    `trap '{ export -p; for __docs_v in $(compgen -v); do case "$__docs_own" in ` +
    `*" $__docs_v "*|__docs_*) ;; *) declare -p "$__docs_v";; esac; done; } ` +
    `> "${state}" 2>/dev/null' EXIT\n${toSandbox(block, sandbox)}`;
  const output = await new Deno.Command("bash", {
    args: ["-e", "-o", "pipefail", "-c", script],
    cwd: sandbox.dir,
    env: {
      PATH: `${dirname(Deno.execPath())}:${Deno.env.get("PATH")}`,
      NO_COLOR: "1",
      KEYGATE_PORT: String(sandbox.ports.get(8443)),
      ...(sandbox.postgres ? { PGPASSWORD: PG_SUPERUSER_PASSWORD } : {}),
      ...env,
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: output.code,
    out: fromSandbox(new TextDecoder().decode(output.stdout), sandbox),
    err: fromSandbox(new TextDecoder().decode(output.stderr), sandbox),
  };
}

/**
 * The outputs a block shows: the comment lines right after a command line
 * (`curl …` then `# 204`) are what it prints; `…` stands for any text.
 */
function expectedOutputs(block: string): string[] {
  const shown: string[] = [];
  let afterCommand = false;
  for (const line of block.split("\n")) {
    const comment = /^# (.+)$/.exec(line)?.[1];
    if (comment !== undefined && afterCommand) shown.push(comment);
    else afterCommand = comment === undefined && line.trim() !== "";
  }
  return shown;
}

/** Asserts that each shown output is a whole line of `out`, in order (`…`: any text). */
function assertShows(out: string, shown: string[], where: string): void {
  const lines = out.split("\n").map((line) => line.trimEnd());
  let from = 0;
  for (const expected of shown) {
    const pattern = new RegExp(
      "^" +
        expected.split("…").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*") +
        "$",
    );
    const at = lines.findIndex((line, i) => i >= from && pattern.test(line));
    assert.ok(at !== -1, `${where} shows "${expected}", but printed:\n${out}`);
    from = at + 1;
  }
}

/**
 * What a `sh runnable fixture=NAME` block finds in place, as the situation
 * its text describes (an operator's existing database).
 */
const FIXTURES: Record<string, (sandbox: Sandbox) => Promise<void>> = {
  /** The shell of the README's quick start after its step 4 (server, API_KEY, TOKEN). */
  "quick-start": runQuickStart,
  /** A database an older keygate left (schema version 5) in /var/lib/keygate, its server stopped. */
  "old-sqlite": async (sandbox) => {
    await stopServers(sandbox.dir);
    const path = `${sandbox.dir}/var/lib/keygate/keygate.sqlite3`;
    for (const file of [path, `${path}-wal`, `${path}-shm`]) rmSync(file, { force: true });
    const raw = new DatabaseSync(path);
    try {
      migrate(raw, MIGRATIONS.filter((m) => m.version <= 5));
      raw.prepare(
        "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES (?, 'x', 1, 1)",
      ).run("cafe\u0301@example.org");
    } finally {
      raw.close();
    }
  },
  /** The `keygate` database as an older keygate left it (schema version 2). */
  "old-postgres": async (sandbox) => {
    await stopServers(sandbox.dir);
    const cluster = sandbox.postgres!;
    const superuser = postgres(
      `postgres://postgres:${PG_SUPERUSER_PASSWORD}@127.0.0.1:${cluster.port}/postgres`,
      { max: 1, onnotice: () => {} },
    );
    try {
      await superuser.unsafe("DROP DATABASE IF EXISTS keygate WITH (FORCE)");
      await superuser.unsafe("CREATE DATABASE keygate OWNER keygate");
    } finally {
      await superuser.end();
    }
    const owner = postgres(`postgres://keygate:kg-pass@127.0.0.1:${cluster.port}/keygate`, {
      max: 1,
      onnotice: () => {},
    });
    try {
      await migratePostgres(owner, POSTGRES_MIGRATIONS.slice(0, 2));
      await owner`INSERT INTO users (email, password_hash, created_at, updated_at)
        VALUES (${"cafe\u0301@example.org"}, 'x', 1, 1)`;
    } finally {
      await owner.end();
    }
  },
};

/**
 * The README quick start's steps 1 to 4, in a sandbox of their own: the
 * shell that docs/api.md's examples continue, with the server running and
 * `API_KEY` and `TOKEN` set.
 */
async function runQuickStart(sandbox: Sandbox): Promise<void> {
  const steps = runnableBlocks(read("README.md"))[0].body;
  const upToStep5 = steps.slice(0, steps.indexOf("\n# 5. "));
  assert.match(upToStep5, /^TOKEN=\$\(curl/m, "the quick start's step 4 sets TOKEN");
  const result = await runBlock(sandbox, upToStep5);
  assert.equal(result.code, 0, `the quick start's steps 1 to 4 failed:\n${result.err}`);
}

/** The pages whose blocks run against PostgreSQL (`KEYGATE_STORE` on port 5432). */
const POSTGRES_PAGES = ["docs/postgres.md"];

/**
 * Stops the servers whose pid files are in the sandbox, and waits until they
 * removed them. A server already stopping (the page's own `kill`) is given
 * time first: a second SIGTERM is not a test of the docs.
 */
async function stopServers(dir: string): Promise<void> {
  const running = () => findPidFiles(dir).filter((file) => existsSync(file));
  for (let waited = 0; waited < 3_000 && running().length > 0; waited += 100) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const pidFiles = stopLeftovers(dir);
  for (let waited = 0; waited < 10_000; waited += 100) {
    if (pidFiles.every((file) => !existsSync(file))) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`servers still running after SIGTERM: ${pidFiles.join(", ")}`);
}

/** The `.pid` files under `dir`, not following links (the sources are linked). */
function findPidFiles(dir: string): string[] {
  const pidFiles: string[] = [];
  const walk = (path: string) => {
    for (const entry of Deno.readDirSync(path)) {
      if (entry.isSymlink) continue;
      if (entry.isDirectory) walk(`${path}/${entry.name}`);
      else if (entry.name.endsWith(".pid")) pidFiles.push(`${path}/${entry.name}`);
    }
  };
  walk(dir);
  return pidFiles;
}

/** Sends SIGTERM to the servers whose pid files are in the sandbox; returns those files. */
function stopLeftovers(dir: string): string[] {
  const pidFiles = findPidFiles(dir);
  for (const file of pidFiles) {
    try {
      Deno.kill(Number(Deno.readTextFileSync(file)), "SIGTERM");
    } catch {
      // Stopped already.
    }
  }
  return pidFiles;
}

for (const path of DOCS) {
  const blocks = runnableBlocks(read(path));
  if (blocks.length === 0) continue;
  const onPostgres = POSTGRES_PAGES.includes(path);
  Deno.test({
    name: `[docs] the runnable commands of ${path} work when pasted in order`,
    ignore: onPostgres && POSTGRES_SKIP !== false,
  }, async () => {
    const dir = makeSandbox();
    const sandbox: Sandbox = {
      dir,
      ports: new Map([...DOC_PORTS].map((port) => [port, findFreePort()])),
    };
    try {
      if (onPostgres) {
        sandbox.postgres = await startPostgres({
          superuser: "postgres",
          superuserPassword: PG_SUPERUSER_PASSWORD,
        });
        sandbox.ports.set(5432, sandbox.postgres.port);
      }
      const outputs: string[] = [];
      for (const [i, block] of blocks.entries()) {
        const { fixture } = readShellMark(block.info) as { fixture?: string };
        if (fixture !== undefined) {
          assert.ok(FIXTURES[fixture], `${path}:${block.line}: no fixture "${fixture}"`);
          await FIXTURES[fixture](sandbox);
        }
        const result = await runBlock(sandbox, block.body);
        const where = `${path}:${block.line} (block ${i + 1})`;
        assert.equal(result.code, 0, `${where} failed:\n${result.out}\n${result.err}`);
        assertShows(result.out, expectedOutputs(block.body), where);
        outputs.push(result.out);
      }
      if (path === "README.md") await checkQuickStart(dir, outputs[0]);
    } finally {
      // A block that failed half-way may have left its servers running.
      stopLeftovers(dir);
      await sandbox.postgres?.stop();
      Deno.removeSync(dir, { recursive: true });
    }
  });
}

/** The quick start got a token, saw it work, revoked it and saw it refused. */
async function checkQuickStart(dir: string, output: string): Promise<void> {
  assert.match(output, /<auth_response><access_token>[a-z0-9]{40}<\/access_token>/);
  assert.match(output, /<token_info><email>alice@example.org<\/email>/);
  assert.match(output, /\n204\n401\n/);
  assert.equal(
    (() => {
      try {
        return Deno.statSync(`${dir}/db/keygate.pid`).isFile;
      } catch {
        return false;
      }
    })(),
    false,
    "the server stopped and removed its pid file",
  );
  const store = openSqliteStore(`${dir}/db/keygate.sqlite3`);
  try {
    assert.deepEqual((await store.listUsers()).map((u) => u.email), ["alice@example.org"]);
    const alice = (await store.findUserByEmail("alice@example.org"))!;
    const tokens = await store.listTokensOfUser(alice.id);
    assert.ok(tokens.length >= 2);
    assert.ok(
      tokens.every((t) => t.revokedAt !== null || t.issuedAt < alice.tokensValidFrom),
    );
  } finally {
    await store.closeStore();
  }
}

Deno.test("[docs] CHANGELOG's newest version is the one --version prints", async () => {
  const { VERSION } = await import("../../src/config/version.ts");
  const newest = /^## \[(\d+\.\d+\.\d+)\]/m.exec(read("CHANGELOG.md"))?.[1];
  assert.equal(newest, VERSION);
});

/** Whether `npx` can run Deno 2.9.6 from its cache (no download in a test). */
function hasCachedNpxDeno(): boolean {
  try {
    const home = Deno.env.get("HOME") ?? "";
    return [...Deno.readDirSync(`${home}/.npm/_npx`)].some((entry) => {
      try {
        return Deno.statSync(`${home}/.npm/_npx/${entry.name}/node_modules/deno/package.json`)
          .isFile &&
          JSON.parse(
              Deno.readTextFileSync(
                `${home}/.npm/_npx/${entry.name}/node_modules/deno/package.json`,
              ),
            ).version === "2.9.6";
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

Deno.test({
  name: "[docs] the README quick start works with only Node and npm (npx), stopped by its pid",
  ignore: !hasCachedNpxDeno(),
}, async () => {
  const dir = makeSandbox();
  const sandbox: Sandbox = { dir, ports: new Map(DOC_PORTS.map((port) => [port, findFreePort()])) };
  const port = sandbox.ports.get(8443)!;
  try {
    const quickStart = runnableBlocks(read("README.md"))[0].body
      .replaceAll("deno task ", "npx -y deno@2.9.6 task ");
    const result = await runBlock(sandbox, quickStart, { npm_config_prefer_offline: "true" });
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /\n204\n401\n/);
    // The server (not just the npm wrapper) stopped: the port is free again.
    for (let i = 0; i < 50; i++) {
      try {
        Deno.listen({ hostname: "127.0.0.1", port }).close();
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    assert.fail(`port ${port} is still held after kill "$(cat db/keygate.pid)"`);
  } finally {
    try {
      Deno.kill(Number(Deno.readTextFileSync(`${dir}/db/keygate.pid`)), "SIGTERM");
    } catch {
      // No server left.
    }
    Deno.removeSync(dir, { recursive: true });
  }
});
