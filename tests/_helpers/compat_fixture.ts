/**
 * The compatibility suites' fixture: the real handler over real TLS with a user and key, the
 * bodies GlobalGiving clients send, and readers of the token and error answers.
 */
import assert from "node:assert/strict";
import { createTestApp, type TestApp } from "./test_app.ts";
import { startTlsServer, type TlsServer } from "./tls_server.ts";

export const EMAIL = "partner@example.org";
export const PASSWORD = "p@ss <word> & more";

export interface Fixture {
  app: TestApp;
  server: TlsServer;
  apiKey: string;
  /** fetch() against the TLS server. */
  call(path: string, init?: RequestInit): Promise<Response>;
  /** POSTs a token request and returns the response. */
  token(body: string, headers?: Record<string, string>, path?: string): Promise<Response>;
  [Symbol.asyncDispose](): Promise<void>;
}

export async function setup(): Promise<Fixture> {
  const app = await createTestApp();
  const userId = await app.addUser(EMAIL, PASSWORD);
  const apiKey = await app.createKey(userId);
  const server = await startTlsServer(app.handler);
  const call = (path: string, init: RequestInit = {}) =>
    fetch(server.origin + path, { ...init, client: server.client });
  return {
    app,
    server,
    apiKey,
    call,
    token: (body, headers = {}, path = "/api/userservice/tokens") =>
      call(path, { method: "POST", body, headers }),
    async [Symbol.asyncDispose]() {
      await server.close();
      app.close();
    },
  };
}

export const jsonBody = (apiKey: string, password = PASSWORD) =>
  JSON.stringify({ auth_request: { user: { email: EMAIL, password }, api_key: apiKey } });

export const xmlBody = (apiKey: string) =>
  `<?xml version="1.0" encoding="UTF-8"?><auth_request><user><email>${EMAIL}</email>` +
  `<password><![CDATA[${PASSWORD}]]></password></user><api_key>${apiKey}</api_key></auth_request>`;

export const XML_TOKEN =
  /<auth_response><access_token>([a-z0-9]{40})<\/access_token><\/auth_response>$/;

/** Reads a token from a 200 response in either format. */
export async function readToken(response: Response): Promise<string> {
  const text = await response.text();
  assert.equal(response.status, 200, text);
  if (response.headers.get("content-type") === "application/json; charset=utf-8") {
    return JSON.parse(text).auth_response.access_token;
  }
  assert.equal(response.headers.get("content-type"), "application/xml; charset=utf-8");
  const token = XML_TOKEN.exec(text)?.[1];
  assert.ok(token, text);
  return token;
}

/** What a client reads from an error: status, format, and error[0]. */
export async function readError(response: Response, format: "json" | "xml") {
  assert.equal(response.headers.get("content-type"), `application/${format}; charset=utf-8`);
  const text = await response.text();
  if (format === "json") {
    const { error_response } = JSON.parse(text);
    assert.equal(error_response.status, String(response.status));
    assert.ok(Array.isArray(error_response.errors.error));
    return error_response.errors.error[0] as { error_code: string; error_message: string };
  }
  assert.match(
    text,
    new RegExp(
      `^<\\?xml[^>]*\\?><error_response><status>${response.status}</status><errors><error>`,
    ),
  );
  return {
    error_code: /<error_code>([^<]*)<\/error_code>/.exec(text)![1],
    error_message: /<error_message>([^<]*)<\/error_message>/.exec(text)![1],
  };
}
