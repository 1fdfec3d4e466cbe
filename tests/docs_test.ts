/**
 * The documentation as a small site that cannot drift: README within 300
 * lines with a table of contents, no prose line over 100 characters, every
 * relative link and anchor resolving, and every `sh runnable` block executed
 * against a temporary database, in order, as a newcomer would paste it.
 */
import assert from "node:assert/strict";
import { basename, dirname, join } from "node:path";
import { openSqliteStore } from "../src/store/sqlite/sqlite_store.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const DOCS = [
  "README.md",
  "CHANGELOG.md",
  ...[...Deno.readDirSync(`${ROOT}docs`)].filter((e) => e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`).sort(),
];
/** Where `deno task bench` writes its table: generated text is not held to the prose rules. */
const GENERATED_MARKER = "<!-- Written by deno task bench from here on";

function read(path: string): string {
  const text = Deno.readTextFileSync(`${ROOT}${path}`);
  const at = text.indexOf(GENERATED_MARKER);
  return at === -1 ? text : text.slice(0, at);
}

/** The lines outside fenced code blocks, with their numbers. */
function proseLines(text: string): [number, string][] {
  let fenced = false;
  const lines: [number, string][] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trimStart().startsWith("```")) fenced = !fenced;
    else if (!fenced) lines.push([i + 1, line]);
  });
  return lines;
}

/** GitHub's heading anchors. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, line] of proseLines(text)) {
    for (const [, id] of line.matchAll(/<a id="([^"]+)"><\/a>/g)) result.add(id);
    const heading = /^#{1,6} (.+)$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, "").replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    result.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return result;
}

Deno.test("[docs] README is at most 300 lines and starts with a table of contents", () => {
  const readme = read("README.md");
  const lines = readme.trimEnd().split("\n");
  assert.ok(lines.length <= 300, `README has ${lines.length} lines`);
  const contents = readme.indexOf("\n## Contents\n");
  assert.ok(contents > 0 && contents < readme.indexOf("\n## ", contents + 1) + 1);
  const own = anchors(readme);
  const listed = [...readme.slice(contents).matchAll(/^- \[[^\]]+\]\(#([^)]+)\)/gm)].map((m) =>
    m[1]
  );
  assert.ok(listed.length >= 6);
  for (const anchor of listed) assert.ok(own.has(anchor), `#${anchor}`);
});

Deno.test("[docs] the site has a page per audience, a LICENSE and a CHANGELOG", () => {
  for (
    const page of ["api", "configuration", "operations", "security", "performance", "architecture"]
  ) {
    assert.ok(DOCS.includes(`docs/${page}.md`), page);
  }
  assert.match(Deno.readTextFileSync(`${ROOT}LICENSE`), /^MIT License\n/);
});

Deno.test("[docs] no line outside code blocks is wider than 100 characters", () => {
  for (const path of DOCS) {
    for (const [n, line] of proseLines(read(path))) {
      assert.ok(line.length <= 100, `${path}:${n} has ${line.length} characters`);
    }
  }
});

Deno.test("[docs] every relative link and anchor resolves", () => {
  for (const path of DOCS) {
    const text = read(path);
    for (const [n, line] of proseLines(text)) {
      for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [file, anchor] = target.split("#");
        const resolved = file === "" ? path : join(dirname(path), file);
        let stat;
        try {
          stat = Deno.statSync(`${ROOT}${resolved}`);
        } catch {
          assert.fail(`${path}:${n}: ${target} does not exist`);
        }
        if (anchor !== undefined && stat.isFile && resolved.endsWith(".md")) {
          assert.ok(
            anchors(Deno.readTextFileSync(`${ROOT}${resolved}`)).has(anchor),
            `${path}:${n}: no heading for #${anchor} in ${resolved}`,
          );
        }
      }
    }
  }
});

/** The `sh runnable` blocks of a page, in order. */
function runnableBlocks(text: string): string[] {
  return [...text.matchAll(/^```sh runnable\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/**
 * A fresh clone to paste commands into: the tracked sources linked, without
 * `db/` (a clone has none), so the blocks make and use a temporary database.
 */
function makeSandbox(): string {
  const dir = Deno.makeTempDirSync({ prefix: "keygate-docs-" });
  for (const entry of Deno.readDirSync(ROOT)) {
    if ([".git", "db", "dist"].includes(entry.name)) continue;
    Deno.symlinkSync(`${ROOT}${entry.name}`, `${dir}/${entry.name}`);
  }
  return dir;
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

async function runBlock(
  dir: string,
  block: string,
  port: number,
  env: Record<string, string> = {},
) {
  const output = await new Deno.Command("bash", {
    args: ["-e", "-o", "pipefail", "-c", block.replaceAll("8443", String(port))],
    cwd: dir,
    env: {
      PATH: `${dirname(Deno.execPath())}:${Deno.env.get("PATH")}`,
      NO_COLOR: "1",
      KEYGATE_PORT: String(port),
      ...env,
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: output.code,
    out: new TextDecoder().decode(output.stdout),
    err: new TextDecoder().decode(output.stderr),
  };
}

for (const path of DOCS) {
  const blocks = runnableBlocks(read(path));
  if (blocks.length === 0) continue;
  Deno.test(`[docs] the runnable commands of ${path} work when pasted in order`, async () => {
    const dir = makeSandbox();
    const port = freePort();
    try {
      const outputs: string[] = [];
      for (const [i, block] of blocks.entries()) {
        const result = await runBlock(dir, block, port);
        assert.equal(result.code, 0, `${basename(path)} block ${i + 1}:\n${result.err}`);
        outputs.push(result.out);
      }
      if (path === "README.md") {
        // The quick start gets a token, sees it work, revokes it and sees it refused.
        assert.match(outputs[0], /<auth_response><access_token>[a-z0-9]{40}<\/access_token>/);
        assert.match(outputs[0], /<token_info><email>alice@example.org<\/email>/);
        assert.match(outputs[0], /\n204\n401\n/);
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
    } finally {
      // A block that failed half-way may have left its server running.
      try {
        Deno.kill(Number(Deno.readTextFileSync(`${dir}/db/keygate.pid`)), "SIGTERM");
      } catch {
        // No server left.
      }
      Deno.removeSync(dir, { recursive: true });
    }
  });
}

Deno.test("[docs] CHANGELOG's newest version is the one --version prints", async () => {
  const { VERSION } = await import("../src/config/version.ts");
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
  const port = freePort();
  try {
    const quickStart = runnableBlocks(read("README.md"))[0]
      .replaceAll("deno task ", "npx -y deno@2.9.6 task ");
    const result = await runBlock(dir, quickStart, port, { npm_config_prefer_offline: "true" });
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
