/**
 * The backends are sliced the same way: each holds one file per method group of the store
 * contract (the interfaces `Store` extends in src/store/store.ts), under the same name, and
 * that file's factory returns exactly its group's type (not a `Pick` or `Omit` of it). A
 * backend's other files are its own helpers (docs/architecture.md, "Adding a backend").
 */
import assert from "node:assert/strict";

const STORE_DIR = new URL("../../src/store/", import.meta.url);
const BACKENDS = ["sqlite", "postgres"] as const;

/** The method groups: the interfaces `Store` extends. */
function readGroups(): string[] {
  const text = Deno.readTextFileSync(new URL("store.ts", STORE_DIR));
  const match = /export interface Store\s+extends([^{]+)\{/.exec(text);
  assert.ok(match, "store.ts declares `interface Store extends …`");
  return match[1].split(",").map((name) => name.trim()).filter((name) => name !== "");
}

/** Every exported function's file and declared return type, in one backend's folder. */
function readFactories(backend: string): { file: string; name: string; returns: string }[] {
  const dir = new URL(`${backend}/`, STORE_DIR);
  const found = [];
  for (const entry of Deno.readDirSync(dir)) {
    if (!entry.isFile || !entry.name.endsWith(".ts")) continue;
    const text = Deno.readTextFileSync(new URL(entry.name, dir));
    const declaration =
      /export (?:async )?function (\w+)(?:<[^>]*>)?\(([^)]*)\)\s*:\s*([^{]+?)\s*\{/g;
    for (const [, name, , returns] of text.matchAll(declaration)) {
      found.push({ file: entry.name, name, returns: returns.replace(/\s+/g, " ") });
    }
  }
  return found;
}

/** Which file of a backend returns which group, failing on a group split over files. */
function readGroupFiles(backend: string, groups: readonly string[]): Map<string, string> {
  const byGroup = new Map<string, string>();
  for (const { file, name, returns } of readFactories(backend)) {
    const mentioned = groups.filter((group) => new RegExp(`\\b${group}\\b`).test(returns));
    if (mentioned.length === 0) continue;
    assert.deepEqual(
      [returns],
      mentioned,
      `${backend}/${file}: ${name}() must return exactly one group's type, not "${returns}"`,
    );
    const other = byGroup.get(returns);
    assert.equal(other, undefined, `${backend}: ${returns} is built in ${other} and ${file}`);
    byGroup.set(returns, file);
  }
  return byGroup;
}

Deno.test("store backends hold one file per method group, with the same names", () => {
  const groups = readGroups();
  assert.ok(groups.includes("UserStore") && groups.includes("TokenStore"), String(groups));
  const layouts = BACKENDS.map((backend) => {
    const byGroup = readGroupFiles(backend, groups);
    const missing = groups.filter((group) => !byGroup.has(group));
    assert.deepEqual(missing, [], `${backend}: no file returns these groups`);
    return Object.fromEntries([...byGroup].sort(([a], [b]) => a < b ? -1 : 1));
  });
  assert.deepEqual(layouts[1], layouts[0], "group → file differs between sqlite/ and postgres/");
});

Deno.test("store backends name a group's file after the group", () => {
  // ApiKeyStore → api_key.ts or api_keys.ts is the pattern a new group follows; the
  // exceptions are listed.
  const irregular: Record<string, string> = { AdminStore: "admin_views.ts" };
  for (const backend of BACKENDS) {
    for (const [group, file] of readGroupFiles(backend, readGroups())) {
      const words = group.replace(/Store$/, "").replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
      const expected = irregular[group] ?? [`${words}.ts`, `${words}s.ts`];
      assert.ok(
        [expected].flat().includes(file),
        `${backend}/${file} holds ${group}: expected ${[expected].flat().join(" or ")}`,
      );
    }
  }
});
