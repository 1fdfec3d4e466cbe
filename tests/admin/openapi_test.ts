/**
 * The admin API's OpenAPI 3.1 document: valid by the OpenAPI schema
 * (@seriousme/openapi-schema-validator), served as is, one operation per
 * route and one route per operation, and strict enough that the response
 * check every admin API test runs (tests/_helpers/admin_api.ts) refuses a wrong body.
 */
import assert from "node:assert/strict";
import { Validator } from "@seriousme/openapi-schema-validator";
import { ADMIN_ROUTES } from "../../src/http/admin/admin_app.ts";
import { ADMIN_OPENAPI } from "../../src/http/admin/openapi.ts";
import { ADMIN_BASE, assertDocumented, createAdminTest } from "../_helpers/admin_api.ts";

Deno.test("ADMIN_OPENAPI is a valid OpenAPI 3.1 document", async () => {
  const result = await new Validator().validate(structuredClone(ADMIN_OPENAPI));
  assert.equal(result.valid, true, JSON.stringify(result.errors));
  assert.equal(ADMIN_OPENAPI.openapi, "3.1.0");
});

Deno.test("[admin] GET /admin/v1/openapi.json serves the document without a token", async () => {
  await using t = await createAdminTest();
  const response = await t.admin(new Request(`${ADMIN_BASE}/admin/v1/openapi.json`));
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.deepEqual(await response.json(), JSON.parse(JSON.stringify(ADMIN_OPENAPI)));
  const posted = await t.admin(
    new Request(`${ADMIN_BASE}/admin/v1/openapi.json`, { method: "POST" }),
  );
  assert.equal(posted.status, 405);
  await posted.body?.cancel();
});

Deno.test("ADMIN_OPENAPI documents every route, and nothing else", () => {
  const documented = Object.entries(ADMIN_OPENAPI.paths).flatMap(([path, item]) =>
    Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`)
  ).filter((op) => op !== "GET /admin/v1/openapi.json").sort();
  const routed = ADMIN_ROUTES.map((route) =>
    `${route.method} ${route.path.replace(/:([a-z]+)/g, "{$1}")}`
  ).sort();
  assert.deepEqual(documented, routed);
  for (const route of ADMIN_ROUTES) {
    const item =
      (ADMIN_OPENAPI.paths as unknown as Record<string, Record<string, { responses: object }>>)[
        route.path.replace(/:([a-z]+)/g, "{$1}")
      ];
    const responses = Object.keys(item[route.method.toLowerCase()].responses);
    assert.equal(
      responses.includes("403"),
      route.caller === "writer",
      `${route.method} ${route.path} 403`,
    );
  }
});

Deno.test("assertDocumented() refuses a body, a field or a status the document does not allow", () => {
  const user = {
    id: 1,
    email: "a@b.org",
    status: "enabled",
    token_timeout_seconds: null,
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
    tokens_valid_from: null,
    effective_token_timeout_seconds: 36000,
  };
  assertDocumented("GET", "/admin/v1/users/1", 200, user);
  assert.throws(() =>
    assertDocumented("GET", "/admin/v1/users/1", 200, { ...user, password_hash: "x" })
  );
  assert.throws(() =>
    assertDocumented("GET", "/admin/v1/users/1", 200, { ...user, status: "gone" })
  );
  assert.throws(() =>
    assertDocumented("GET", "/admin/v1/users/1", 200, { ...user, created_at: "today" })
  );
  assert.throws(() =>
    assertDocumented("GET", "/admin/v1/users/1", 403, { error: { code: "x", message: "y" } })
  );
  assert.throws(() => assertDocumented("GET", "/admin/v1/users/1", 404, { error: "not found" }));
});
