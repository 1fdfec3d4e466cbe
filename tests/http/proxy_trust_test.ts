import assert from "node:assert/strict";
import { readConfig } from "../../src/config/read_config.ts";
import type { Config } from "../../src/config/settings.ts";
import {
  createAddressMatcher,
  findForwardedClient,
  isCidr,
  isLoopbackOrPrivate,
} from "../../src/platform/ip.ts";
import { assertError, BASE, issueToken, jsonAuthRequest } from "../_helpers/requests.ts";
import { createTestApp } from "../_helpers/test_app.ts";

const CURRENT = "/api/secure/userservice/tokens/current";
const PROXY = { trustedProxies: ["127.0.0.1/32", "::1/128", "10.1.0.0/16"] };

Deno.test("isCidr() and isLoopbackOrPrivate() classify addresses", () => {
  for (const cidr of ["10.0.0.0/8", "127.0.0.1/32", "::1/128", "fd00::/8", "::ffff:10.0.0.0/104"]) {
    assert.ok(isCidr(cidr), cidr);
  }
  for (const bad of ["10.0.0.0", "10.0.0.0/33", "example.org/8", "", "::1/129"]) {
    assert.ok(!isCidr(bad), bad);
  }
  for (const host of ["localhost", "127.0.0.1", "::1", "10.2.3.4", "172.16.0.1", "192.168.1.1"]) {
    assert.ok(isLoopbackOrPrivate(host), host);
  }
  for (const host of ["0.0.0.0", "::", "8.8.8.8", "172.32.0.1", "2001:db8::1", "example.org"]) {
    assert.ok(!isLoopbackOrPrivate(host), host);
  }
});

Deno.test("createAddressMatcher() matches IPv4, IPv6 and IPv4-mapped IPv6 peers", () => {
  const trusted = createAddressMatcher(PROXY.trustedProxies);
  assert.ok(trusted("127.0.0.1"));
  assert.ok(trusted("::ffff:127.0.0.1"));
  assert.ok(trusted("::1"));
  assert.ok(trusted("10.1.200.3"));
  assert.ok(!trusted("10.2.0.1"));
  assert.ok(!trusted("127.0.0.2"));
  assert.ok(!trusted("not an address"));
});

Deno.test("findForwardedClient() walks X-Forwarded-For right to left past trusted proxies", () => {
  const trusted = createAddressMatcher(PROXY.trustedProxies);
  assert.equal(findForwardedClient("127.0.0.1", null, trusted), "127.0.0.1");
  assert.equal(findForwardedClient("127.0.0.1", "203.0.113.9", trusted), "203.0.113.9");
  // A client cannot pose as another by sending its own X-Forwarded-For.
  assert.equal(
    findForwardedClient("127.0.0.1", "198.51.100.1, 203.0.113.9, 10.1.0.5", trusted),
    "203.0.113.9",
  );
  assert.equal(findForwardedClient("127.0.0.1", "junk, 10.1.0.5", trusted), "10.1.0.5");
  assert.equal(findForwardedClient("127.0.0.1", "[2001:db8::7]", trusted), "2001:db8::7");
});

async function setup() {
  const app = await createTestApp({ proxy: PROXY });
  const userId = await app.addUser("p@example.org", "pw");
  const apiKey = await app.createKey(userId);
  return { app, apiKey };
}

const proxied = (path: string, init: RequestInit & { peer?: string } = {}) => ({
  request: new Request(BASE + path, init),
  info: { remoteAddr: { hostname: init.peer ?? "127.0.0.1" } },
});

Deno.test("[e2e] proxy mode refuses requests without X-Forwarded-Proto: https with 403", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const body = jsonAuthRequest("p@example.org", "pw", apiKey);
  for (const proto of [undefined, "http", "https, http"]) {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json",
    };
    if (proto !== undefined) headers["x-forwarded-proto"] = proto;
    const { request, info } = proxied("/api/userservice/tokens", {
      method: "POST",
      body,
      headers,
    });
    const message = await assertError(
      await app.handler(request, info),
      403,
      "https_required",
      "json",
    );
    assert.equal(message, "HTTPS required: the proxy must forward HTTPS");
  }
  // XML callers get XML.
  const xml = proxied(CURRENT, { headers: { "x-forwarded-proto": "http" } });
  await assertError(await app.handler(xml.request, xml.info), 403, "https_required", "xml");
  assert.equal(await app.store.countRows("tokens"), 0);
});

Deno.test("[e2e] proxy mode refuses peers outside --trusted-proxies, even with https", async () => {
  const { app } = await setup();
  using _ = app;
  const { request, info } = proxied(CURRENT, {
    peer: "192.168.5.5",
    headers: { "x-forwarded-proto": "https", "x-forwarded-for": "127.0.0.1" },
  });
  await assertError(await app.handler(request, info), 403, "untrusted_proxy");
  const line = JSON.parse(app.logLines.at(-1)!);
  assert.equal(line.status, 403);
  assert.equal(line.client, "192.168.5.5", "X-Forwarded-For of an untrusted peer is ignored");
});

Deno.test("[e2e] proxy mode takes the client address from X-Forwarded-For of a trusted proxy", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const forwarded = { "x-forwarded-proto": "https", "x-forwarded-for": "6.6.6.6, 203.0.113.9" };
  const { request, info } = proxied("/api/userservice/tokens", {
    method: "POST",
    body: jsonAuthRequest("p@example.org", "pw", apiKey),
    headers: { ...forwarded, "content-type": "application/json", accept: "application/json" },
  });
  const response = await app.handler(request, info);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  const token = (await response.json()).auth_response.access_token;
  assert.match(token, /^[a-z0-9]{40}$/);
  assert.equal(await app.store.countRows("tokens"), 1);
  const lines = app.logLines.map((line) => JSON.parse(line));
  assert.equal(lines.find((l) => l.event === "token_issued").client, "203.0.113.9");
  assert.equal(lines.at(-1).msg, "request");
  assert.equal(lines.at(-1).client, "203.0.113.9");

  const secure = proxied(`${CURRENT}?api_key=${apiKey}&api_token=${token}`, {
    peer: "::ffff:10.1.0.9",
    headers: forwarded,
  });
  assert.equal((await app.handler(secure.request, secure.info)).status, 200);
});

Deno.test("[e2e] outside proxy mode X-Forwarded-* headers are ignored", async () => {
  using app = await createTestApp();
  const userId = await app.addUser("p@example.org", "pw");
  const apiKey = await app.createKey(userId);
  await issueToken(app.handler, "p@example.org", "pw", apiKey);
  const request = new Request(`${BASE}/healthz`, {
    headers: { "x-forwarded-for": "203.0.113.9", "x-forwarded-proto": "http" },
  });
  const response = await app.handler(request, { remoteAddr: { hostname: "198.51.100.7" } });
  assert.equal(response.status, 200);
  await response.body?.cancel();
  assert.equal(JSON.parse(app.logLines.at(-1)!).client, "198.51.100.7");
});

Deno.test("[e2e] proxy mode answers health checks from any peer without forwarding headers", async () => {
  const { app } = await setup();
  using _ = app;
  for (const path of ["/healthz", "/readyz"]) {
    const { request, info } = proxied(path, { peer: "192.168.9.9" });
    const response = await app.handler(request, info);
    assert.equal(response.status, 200, path);
    await response.body?.cancel();
  }
});

Deno.test("readConfig() allows --behind-proxy only on loopback or private addresses", () => {
  const config = readConfig(["--behind-proxy", "on"], {}) as Config;
  assert.equal(config.behindProxy, true);
  assert.equal(config.hostname, "127.0.0.1", "the default hostname becomes loopback");
  assert.deepEqual(config.trustedProxies, ["127.0.0.1/32", "::1/128"]);
  assert.equal(
    (readConfig(["--behind-proxy", "on", "--hostname", "10.0.0.5"], {}) as Config).hostname,
    "10.0.0.5",
  );
  const bad: [string[], Record<string, string>, RegExp][] = [
    [["--behind-proxy", "on", "--hostname", "0.0.0.0"], {}, /loopback or private address/],
    [["--behind-proxy", "on"], { KEYGATE_HOSTNAME: "8.8.8.8" }, /loopback or private/],
    [
      ["--behind-proxy=yes"],
      {},
      /Invalid --behind-proxy "yes": expected on, off, true, false, 1 or 0/,
    ],
    [["--behind-proxy", "on", "--cert", "c", "--key", "k"], {}, /do not apply/],
    [["--behind-proxy", "on", "--trusted-proxies", ""], {}, /needs at least one range/],
    [
      ["--trusted-proxies", "10.0.0.1"],
      {},
      /Invalid --trusted-proxies "10.0.0.1": entry "10.0.0.1" is not a CIDR range/,
    ],
  ];
  for (const [args, env, message] of bad) {
    assert.throws(() => readConfig(args, env), message, args.join(" "));
  }
});
