/**
 * What the portal's end-to-end tests share: the passwords they sign up and change to, and the
 * JSON answer read with its content type checked.
 *
 * @module
 */
import assert from "node:assert/strict";

export const PASSWORD = "correct horse battery";
export const NEW_PASSWORD = "another long secret 42";

/** The JSON body of a portal answer, after checking its content type. */
export async function json(response: Response) {
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  return await response.json();
}
