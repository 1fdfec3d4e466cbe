/**
 * Requests to the handler as a client sends them (token requests, secure GETs) and the
 * assertion every error answer must pass.
 */
import assert from "node:assert/strict";
import type { Handler } from "../../src/http/app.ts";

export const BASE = "https://keygate.test";

/** JSON `auth_request` body. */
export function jsonAuthRequest(email: string, password: string, apiKey?: string): string {
  const request: Record<string, unknown> = { user: { email, password } };
  if (apiKey !== undefined) request.api_key = apiKey;
  return JSON.stringify({ auth_request: request });
}

/** XML `auth_request` body. */
export function xmlAuthRequest(email: string, password: string, apiKey?: string): string {
  const key = apiKey === undefined ? "" : `<api_key>${apiKey}</api_key>`;
  return `<?xml version="1.0" encoding="UTF-8"?><auth_request><user><email>${email}</email>` +
    `<password>${password}</password></user>${key}</auth_request>`;
}

/** POSTs a token request to the handler. */
export function postToken(
  handler: Handler,
  body: string,
  headers: Record<string, string> = { "content-type": "application/json" },
  path = "/api/userservice/tokens",
): Promise<Response> {
  return handler(new Request(BASE + path, { method: "POST", body, headers }));
}

/** Gets a token through the handler (JSON) and returns it. */
export async function issueToken(
  handler: Handler,
  email: string,
  password: string,
  apiKey: string,
): Promise<string> {
  const response = await postToken(handler, jsonAuthRequest(email, password, apiKey), {
    "content-type": "application/json",
    accept: "application/json",
  });
  if (response.status !== 200) throw new Error(`token request failed: ${await response.text()}`);
  return (await response.json()).auth_response.access_token;
}

/** A secure GET through the handler with the token in the query string. */
export function secureGet(
  handler: Handler,
  path: string,
  apiKey: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  const url = new URL(BASE + path);
  url.searchParams.set("api_key", apiKey);
  url.searchParams.set("api_token", token);
  return handler(new Request(url, { headers }));
}

/** Asserts an `error_response` with this status and code; returns the message (JSON) or body (XML). */
export async function assertError(
  response: Response,
  status: number,
  code: string,
  format: "json" | "xml" = "xml",
) {
  assert.equal(response.status, status);
  assert.equal(response.headers.get("content-type"), `application/${format}; charset=utf-8`);
  const body = await response.text();
  if (format === "json") {
    const error = JSON.parse(body).error_response;
    assert.equal(error.status, String(status));
    assert.equal(error.errors.error[0].error_code, code);
    return error.errors.error[0].error_message as string;
  }
  assert.match(body, new RegExp(`<status>${status}</status>.*<error_code>${code}</error_code>`));
  return body;
}
