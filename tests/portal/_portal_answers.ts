/**
 * What the portal's end-to-end tests share: the passwords they sign up and change to (a second
 * person's too), and the JSON answer read with its content type checked.
 *
 * @module
 */
import assert from "node:assert/strict";

export const PASSWORD = "correct horse battery";
export const NEW_PASSWORD = "another long secret 42";
/** A second person's password (a stranger, another user). */
export const OTHER_PASSWORD = "stranger danger 12345";

/** The JSON body of a portal answer, after checking its content type. */
export async function json(response: Response) {
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  return await response.json();
}

/** Asserts a portal error answer: its status, JSON content type and error code. */
export async function assertError(response: Response, status: number, code: string, what = "") {
  assert.equal(response.status, status, what);
  assert.equal((await json(response)).error.code, code, what);
}
