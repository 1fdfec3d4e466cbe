import assert from "node:assert/strict";
import {
  createDonationLedger,
  createDonationRoutes,
  DONATIONS_PATH,
} from "../../../examples/donations/donations.ts";
import { createHandler } from "../../../src/http/app.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import { openSqliteStore } from "../../../src/store/sqlite/sqlite_store.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { assertError, BASE, issueToken } from "../../_helpers/requests.ts";
import { createTestApp } from "../../_helpers/test_app.ts";
import { startTlsServer } from "../../_helpers/tls_server.ts";
import { silentLogger } from "../../../src/platform/logger.ts";

async function setup() {
  const ledger = createDonationLedger();
  const clock = createFakeClock();
  const app = await createTestApp({ secureRoutes: createDonationRoutes(ledger, clock) });
  const userId = await app.addUser("alice@example.org", "pw");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  return { app, ledger, userId, apiKey, token };
}

function donate(
  handler: (request: Request) => Promise<Response>,
  query: string,
  body: string,
  headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json",
  },
) {
  return handler(
    new Request(`${BASE}${DONATIONS_PATH}?${query}`, { method: "POST", body, headers }),
  );
}

Deno.test("[e2e] POST /api/secure/givingservice/donations (example) records a donation and returns a receipt", async () => {
  const { app, ledger, userId, apiKey, token } = await setup();
  using _ = app;
  const response = await donate(
    app.handler,
    `api_key=${apiKey}&api_token=${token}`,
    JSON.stringify({ donation: { project_id: "42", amount: "25.5", currency: "EUR" } }),
  );
  assert.equal(response.status, 201);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.deepEqual(await response.json(), {
    donation_receipt: {
      receipt_number: "GG-2026-000001",
      project_id: "42",
      amount: "25.50",
      currency: "EUR",
      donor: "alice@example.org",
      created_at: "2026-01-01T00:00:00.000Z",
    },
  });
  assert.deepEqual(ledger.list(), [{
    receiptNumber: "GG-2026-000001",
    userId,
    email: "alice@example.org",
    projectId: "42",
    amountCents: 2550,
    currency: "EUR",
    createdAt: Date.parse("2026-01-01T00:00:00Z"),
  }]);

  const xml = await donate(
    app.handler,
    `api_key=${apiKey}&api_token=${token}`,
    "<donation><project_id>7</project_id><amount>10</amount></donation>",
    { "content-type": "application/xml" },
  );
  assert.equal(xml.status, 201);
  assert.equal(xml.headers.get("content-type"), "application/xml; charset=utf-8");
  assert.match(
    await xml.text(),
    /<donation_receipt><receipt_number>GG-2026-000002<\/receipt_number><project_id>7<\/project_id><amount>10.00<\/amount><currency>USD<\/currency>/,
  );
  assert.equal(ledger.list().length, 2);
});

Deno.test("[e2e] POST /api/secure/givingservice/donations (example) needs the token and a valid donation", async () => {
  const { app, ledger, apiKey, token } = await setup();
  using _ = app;
  const body = JSON.stringify({ donation: { project_id: "42", amount: "25.00" } });
  await assertError(
    await donate(app.handler, `api_key=${apiKey}`, body),
    401,
    "invalid_token",
    "json",
  );
  for (
    const bad of [
      { donation: { project_id: "42", amount: "-5" } },
      { donation: { project_id: "42", amount: "0" } },
      { donation: { project_id: "42", amount: "1.005" } },
      { donation: { project_id: "x", amount: "5" } },
      { donation: { project_id: "42", amount: "5", currency: "usd" } },
      { donation: [] },
    ]
  ) {
    await assertError(
      await donate(app.handler, `api_key=${apiKey}&api_token=${token}`, JSON.stringify(bad)),
      400,
      "invalid_request",
      "json",
    );
  }
  const get = await app.handler(
    new Request(`${BASE}${DONATIONS_PATH}?api_key=${apiKey}&api_token=${token}`),
  );
  await assertError(get, 405, "method_not_allowed");
  assert.equal(get.headers.get("allow"), "POST, OPTIONS");
  assert.equal(ledger.list().length, 0);
});

Deno.test("[server] the donations example over real TLS", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  await using server = await startTlsServer(app.handler);
  const response = await fetch(`${server.origin}${DONATIONS_PATH}.json`, {
    method: "POST",
    client: server.client,
    headers: {
      "x-api-key": apiKey,
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
    },
    body: '{"donation":{"project_id":"1","amount":"3"}}',
  });
  assert.equal(response.status, 201);
  assert.equal((await response.json()).donation_receipt.receipt_number, "GG-2026-000001");
});

Deno.test("createHandler() refuses secureRoutes that could never be reached or shadow keygate's", async () => {
  const store = openSqliteStore(":memory:");
  try {
    const deps = {
      store,
      hasher: createPasswordHasher(),
      clock: createFakeClock(),
      logger: silentLogger,
      defaultTimeoutSeconds: 60,
    };
    const handler = () => new Response();
    for (
      const path of [
        "/api/givingservice/donations",
        "/api/secure/x/",
        "/api/%73ecure/x",
        "/api/secure/x.json",
        "/api/secure/userservice/tokens/current",
        "/api/secure/userservice/mine",
      ]
    ) {
      assert.throws(
        () => createHandler({ ...deps, secureRoutes: { [path]: { GET: handler } } }),
        TypeError,
        path,
      );
    }
    createHandler({ ...deps, secureRoutes: { "/api/secure/x": { GET: handler } } });
  } finally {
    await store.closeStore();
  }
});
