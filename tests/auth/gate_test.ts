import assert from "node:assert/strict";
import { toIdentityHeaders } from "../../src/auth/gate.ts";
import { isKeygatePath } from "../../src/http/upstream.ts";

Deno.test("toIdentityHeaders() gives user id, e-mail and key id, percent-encoding a non-ASCII e-mail", () => {
  assert.deepEqual(toIdentityHeaders({ userId: 7, email: "a@b.org", apiKeyId: 3 }), [
    ["x-keygate-user", "7"],
    ["x-keygate-email", "a@b.org"],
    ["x-keygate-key-id", "3"],
  ]);
  const [, email] = toIdentityHeaders({ userId: 1, email: "zoë@exämple.org", apiKeyId: 1 });
  assert.deepEqual(email, ["x-keygate-email", "zo%C3%AB@ex%C3%A4mple.org"]);
  assert.doesNotThrow(() => new Headers([email as [string, string]]));
});

Deno.test("toIdentityHeaders() gives two addresses two headers: a % is encoded too", () => {
  // "a%C3%A9@…" is a valid address of its own: it must not read as "aé@…" once decoded.
  const header = (address: string) =>
    toIdentityHeaders({ userId: 1, email: address, apiKeyId: 1 })[1][1];
  const accented = header("a\u00e9@example.org");
  const literal = header("a%C3%A9@example.org");
  assert.notEqual(accented, literal);
  assert.equal(decodeURIComponent(accented), "a\u00e9@example.org");
  assert.equal(decodeURIComponent(literal), "a%C3%A9@example.org");
  assert.equal(header("100%@example.org"), "100%25@example.org");
});

Deno.test("isKeygatePath() covers keygate's own paths in any letter case, and nothing else", () => {
  for (
    const path of [
      "/healthz",
      "/readyz",
      "/api/userservice",
      "/api/userservice/tokens",
      "/API/UserService/verify",
      "/api/secure/userservice/tokens/current",
      "/api/Secure/userservice/anything",
    ]
  ) {
    assert.equal(isKeygatePath(path), true, path);
  }
  for (
    const path of ["/", "/healthz/x", "/api/userservices", "/api/secure/x", "/x/api/userservice"]
  ) {
    assert.equal(isKeygatePath(path), false, path);
  }
});
