/**
 * The edges (src/cli/, src/http/) parse and render; every change goes through a use case of
 * src/auth/. This test reads the Store interface for its writing methods and fails when an
 * edge file calls one.
 */
import assert from "node:assert/strict";
import { walkSync } from "../_helpers/walk_source.ts";

const ROOT = new URL("../../", import.meta.url);
const STORE_FILES = ["src/store/store.ts", "src/store/store_admin.ts"];
const EDGES = ["src/cli", "src/http"];

/** How a writing method's name begins (the store's verbs are domain verbs, store.ts). */
const WRITING_VERB = /^(insert|update|delete|revoke|rotate|record|clear|append|purge)[A-Z]/;

/** Every method declared in the Store interface's files: `name(` at the start of a line. */
function readStoreMethods(): string[] {
  const names = new Set<string>();
  for (const file of STORE_FILES) {
    const text = Deno.readTextFileSync(new URL(file, ROOT));
    for (const match of text.matchAll(/^ {2}([a-z][A-Za-z]+)\(/gm)) names.add(match[1]);
  }
  return [...names].sort();
}

Deno.test("the Store interface's writing methods are found by their verbs", () => {
  const methods = readStoreMethods();
  const writing = methods.filter((name) => WRITING_VERB.test(name));
  // Known members on both sides, so that a change in how the interface is written fails here.
  for (const name of ["insertUser", "updateUserPassword", "purgeEndedTokens", "appendAudit"]) {
    assert.ok(writing.includes(name), `${name} not found among ${writing.join(", ")}`);
  }
  for (const name of ["findUserByEmail", "listApiKeys", "searchAuditPage", "readGrantEpoch"]) {
    assert.ok(methods.includes(name) && !writing.includes(name), name);
  }
  assert.ok(writing.length >= 20, `only ${writing.length} writing methods found`);
});

Deno.test("src/cli/ and src/http/ call no writing method of the store", () => {
  const writing = readStoreMethods().filter((name) => WRITING_VERB.test(name));
  // A call on the store (`store.x(`, `deps.store.x(`); a use case of the same name is no match.
  const call = new RegExp(`\\bstore\\??\\.(${writing.join("|")})\\(`, "g");
  const found: string[] = [];
  for (const edge of EDGES) {
    for (const path of walkSync(new URL(edge, ROOT))) {
      const lines = Deno.readTextFileSync(path).split("\n");
      lines.forEach((line, i) => {
        // Comments may name a method; code may not call one.
        if (/^\s*(\*|\/\/)/.test(line)) return;
        for (const match of line.matchAll(call)) {
          found.push(`${path.pathname.slice(ROOT.pathname.length)}:${i + 1}: ${match[1]}`);
        }
      });
    }
  }
  assert.deepEqual(found, [], "edges must call a use case of src/auth/ instead");
});
