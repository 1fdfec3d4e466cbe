import assert from "node:assert/strict";
import { AUTH_ERROR_CODES, AuthError } from "../../src/auth/errors.ts";
import {
  AUTH_ERROR_STATUS,
  HttpError,
  toErrorResponse,
  toHttpError,
} from "../../src/http/errors.ts";
import { StoreConflict, StoreError, StoreUnavailable } from "../../src/store/errors.ts";

Deno.test("toHttpError() maps every AuthError code through the one status table", () => {
  assert.deepEqual(Object.keys(AUTH_ERROR_STATUS).sort(), [...AUTH_ERROR_CODES].sort());
  for (const code of AUTH_ERROR_CODES) {
    const mapped = toHttpError(new AuthError(code, `Failed: ${code}`));
    assert.equal(mapped.status, AUTH_ERROR_STATUS[code], code);
    assert.equal(mapped.code, code);
    assert.equal(mapped.message, `Failed: ${code}`);
  }
  assert.deepEqual(
    [AUTH_ERROR_STATUS.invalid_credentials, AUTH_ERROR_STATUS.too_many_attempts],
    [401, 429],
  );
});

Deno.test("toHttpError() adds a Bearer challenge to token failures and Retry-After when given", () => {
  const expired = toHttpError(new AuthError("token_expired", "Access token expired"));
  assert.equal(
    expired.headers.get("www-authenticate"),
    'Bearer realm="keygate", error="token_expired"',
  );
  assert.equal(expired.headers.get("retry-after"), null);
  const credentials = toHttpError(new AuthError("invalid_credentials", "Invalid", { detail: "x" }));
  assert.equal(credentials.headers.get("www-authenticate"), null);
  assert.equal(credentials.cause, "x", "the detail goes to the server's log only");
  const busy = toHttpError(new AuthError("service_busy", "Busy", { retryAfterSeconds: 1 }));
  assert.deepEqual([busy.status, busy.headers.get("retry-after")], [503, "1"]);
});

Deno.test("toHttpError() answers an unavailable store with 503, any other store error with 500", async () => {
  const unavailable = toHttpError(new StoreUnavailable("The database is unavailable: locked"));
  assert.deepEqual(
    [unavailable.status, unavailable.code, unavailable.headers.get("retry-after")],
    [503, "service_unavailable", "1"],
  );
  assert.equal(unavailable.message, "The database is busy: try again shortly");
  for (
    const error of [new StoreConflict("taken"), new StoreError("no such table"), new Error("x")]
  ) {
    const mapped = toHttpError(error);
    assert.deepEqual([mapped.status, mapped.code], [500, "internal_error"]);
    assert.equal(mapped.message, "Internal server error", "no driver text reaches the caller");
  }
  const edge = new HttpError(404, "not_found", "No endpoint at this path");
  assert.equal(toHttpError(edge), edge);
  const response = toErrorResponse(toHttpError(new AuthError("forbidden", "Not this key")), "json");
  assert.equal(response.status, 403);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.deepEqual(await response.json(), {
    error_response: {
      status: "403",
      errors: { error: [{ error_code: "forbidden", error_message: "Not this key" }] },
    },
  });
});
