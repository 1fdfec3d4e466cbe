/**
 * The edges (src/cli/, src/http/) parse and render; every change goes through a use case of
 * src/auth/. This test reads every store interface (`export interface …Store` in
 * src/store/store*.ts) and fails when an edge file calls one of its methods that is not a
 * listed reader: a method added to a store is a writer until it is listed here.
 */
import assert from "node:assert/strict";
import { walkSync } from "../_helpers/walk_source.ts";

const ROOT = new URL("../../", import.meta.url);
const STORE_DIR = new URL("src/store/", ROOT);
const EDGES = ["src/cli", "src/http"];

/**
 * The methods an edge may call: they read, or open and close the store itself. Every other
 * method of a store interface changes stored state.
 */
const READERS = new Set([
  "checkStoreReady",
  "findWriteFailure",
  "closeStore",
  "findUserByEmail",
  "findUserAndKey",
  "findUserById",
  "listUsers",
  "findApiKeyByHash",
  "findApiKeyById",
  "listApiKeys",
  "findKeyHolder",
  "findTokenGrant",
  "findTokenStatus",
  "countLiveTokens",
  "listTokensOfUser",
  "readGrantEpoch",
  "readGrantChanges",
  "readGrantInvalidations",
  "findLoginFailures",
  "listLoginFailures",
  "listAudit",
  "countRows",
  "findOperatorByHash",
  "listOperators",
  "searchUsers",
  "searchApiKeys",
  "searchLoginFailures",
  "countBlockedSubjects",
  "searchTokensOfUser",
  "searchAuditPage",
  "searchAudit",
  "listLimits",
  "listLimitUsage",
  "findPortalAccount",
  "findPortalCode",
  "findPortalSessionUser",
  "listPortalUsers",
  "countMail",
]);

/** The src/store/store*.ts files, where the store interfaces are declared. */
function storeFiles(): URL[] {
  return [...Deno.readDirSync(STORE_DIR)]
    .filter((entry) => entry.isFile && /^store.*\.ts$/.test(entry.name))
    .map((entry) => new URL(entry.name, STORE_DIR))
    .sort((a, b) => a.href.localeCompare(b.href));
}

/**
 * Every method of every `export interface …Store` (from its `{` to the `}` that starts a
 * line): `name(` or `name<` at the start of a line inside it. Other interfaces (rows,
 * requests with callbacks such as `LimitLeaseRequest.want`) are not read.
 */
function readStoreMethods(): Map<string, string> {
  const methods = new Map<string, string>();
  for (const file of storeFiles()) {
    const text = Deno.readTextFileSync(file);
    const body = /^export interface ([A-Z][A-Za-z]*Store)\b[^{]*\{\n([\s\S]*?)^\}/gm;
    for (const [, name, members] of text.matchAll(body)) {
      for (const [, method] of members.matchAll(/^ {2}([a-z][A-Za-z]*)[(<]/gm)) {
        methods.set(method, name);
      }
    }
  }
  return methods;
}

function readWritingMethods(): string[] {
  return [...readStoreMethods().keys()].filter((name) => !READERS.has(name)).sort();
}

Deno.test("every store interface is read, and every listed reader is one of its methods", () => {
  const methods = readStoreMethods();
  const interfaces = new Set(methods.values());
  for (const name of ["LifecycleStore", "UserStore", "AdminStore", "LimitStore", "PortalStore"]) {
    assert.ok(interfaces.has(name), `${name} not read; found ${[...interfaces].join(", ")}`);
  }
  // A stale name here would let a renamed writer through under its old reader's name.
  for (const name of READERS) assert.ok(methods.has(name), `${name} is no store method`);
  const writing = readWritingMethods();
  for (
    const name of [
      "insertUser",
      "appendAudit",
      "usePortalCode",
      "insertMail",
      "putLimit",
      "deleteLimit",
      "leaseLimits",
      "claimMail",
      "markMailSent",
      "replacePortalCode",
      "insertOperator",
    ]
  ) {
    assert.ok(writing.includes(name), `${name} not found among ${writing.join(", ")}`);
  }
  assert.ok(!methods.has("want"), "a callback of a request type is no store method");
  assert.ok(writing.length >= 40, `only ${writing.length} writing methods found`);
});

/**
 * `store.x(`, `deps.store?.x(`, `portalStore.x(`, for x a writing method, also split across
 * lines (`deps.store\n  .x(`): found in the text with comment lines blanked, each at the line of
 * its method name. The receiver must be named `…store`/`…Store`: a store under another name
 * (`const s = deps.store; s.x(…)`, or a method taken out of it) is not found, so review keeps
 * edges from aliasing the store.
 */
function findWritingCalls(text: string, writing: readonly string[]): string[] {
  // The receiver must be a store: a use case of the same name (`revocation.revokeTokenOfKey`)
  // is no match.
  const call = new RegExp(`\\b\\w*[sS]tore\\s*\\??\\s*\\.\\s*(${writing.join("|")})\\s*\\(`, "g");
  // Comments may name a method; code may not call one. Blanked, so lines keep their numbers.
  const code = text.split("\n").map((line) => /^\s*(\*|\/\/)/.test(line) ? "" : line).join("\n");
  const found: string[] = [];
  for (const match of code.matchAll(call)) {
    const at = match.index! + match[0].lastIndexOf(match[1]);
    const line = code.slice(0, at).split("\n").length;
    found.push(`${line}: ${match[1]}`);
  }
  return found;
}

Deno.test("a writing call is found on any store receiver, a use case of that name is not", () => {
  const writing = readWritingMethods();
  const text = [
    "await deps.store.usePortalCode(code.id, change);",
    "await portalStore?.claimMail(now, options);",
    "await store.putLimit(limit, change);",
    "// store.deleteLimit(id) in a comment",
    "await revocation.revokeTokenOfKey(token, who);",
    "await store.findPortalSessionUser(hash, now);",
    "await deps.store",
    "  .insertMail(mail, change);",
    "await deps.portalStore?.",
    "  claimMail (now, options);",
    "const written = await deps",
    "  .store",
    "  // a comment between",
    "  .putLimit(limit, change);",
  ].join("\n");
  assert.deepEqual(findWritingCalls(text, writing), [
    "1: usePortalCode",
    "2: claimMail",
    "3: putLimit",
    "8: insertMail",
    "10: claimMail",
    "14: putLimit",
  ]);
});

Deno.test("src/cli/ and src/http/ call no writing method of the store", () => {
  const writing = readWritingMethods();
  const found: string[] = [];
  for (const edge of EDGES) {
    for (const path of walkSync(new URL(edge, ROOT))) {
      const relative = path.pathname.slice(ROOT.pathname.length);
      for (const hit of findWritingCalls(Deno.readTextFileSync(path), writing)) {
        found.push(`${relative}:${hit}`);
      }
    }
  }
  assert.deepEqual(found, [], "edges must call a use case of src/auth/ instead");
});
