/**
 * The grant change feed fails closed: a store that cannot confirm
 * freshness serves nothing from the grant cache, and a store that cannot
 * answer gets 503 with Retry-After, never a stale 200.
 */
import assert from "node:assert/strict";
import { createHandler } from "../../src/http/app.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { StoreUnavailable } from "../../src/store/errors.ts";
import type { GrantEpoch, Store } from "../../src/store/store.ts";
import { createCapturingLogger } from "../_helpers/capturing_logger.ts";
import { assertError, issueToken, secureGet } from "../_helpers/requests.ts";
import { createTestApp } from "../_helpers/test_app.ts";

const CURRENT = "/api/secure/userservice/tokens/current";
const hasher = createPasswordHasher();

Deno.test("[e2e] GET /api/secure/... answers 503 while the store can neither confirm freshness nor answer", async () => {
  await using app = await createTestApp();
  const apiKey = await app.createKey(await app.addUser("a@b.org", "pw"));
  const token = await issueToken(app.handler, "a@b.org", "pw", apiKey);
  let epoch: GrantEpoch | undefined = 1;
  let reachable = true;
  let lookups = 0;
  const store: Store = {
    ...app.store,
    readGrantEpoch: () => epoch,
    findTokenGrant(lookup) {
      lookups++;
      if (!reachable) return Promise.reject(new StoreUnavailable("The database is unreachable"));
      return app.store.findTokenGrant(lookup);
    },
  };
  const handler = createHandler({
    store,
    hasher,
    clock: app.clock,
    logger: createCapturingLogger().logger,
    defaultTimeoutSeconds: 3600,
  });
  const get = () => secureGet(handler, CURRENT, apiKey, token, { accept: "application/json" });

  for (let i = 0; i < 2; i++) {
    const response = await get();
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal((await response.json()).token_info.email, "a@b.org");
  }
  assert.equal(lookups, 1, "the second request was answered from the cache");

  // Freshness unconfirmed and the database down: no cached answer, 503 in the caller's format.
  epoch = undefined;
  reachable = false;
  const refused = await get();
  assert.equal(refused.headers.get("retry-after"), "1");
  await assertError(refused, 503, "service_unavailable", "json");
  assert.equal(lookups, 2);

  // The database answers again but freshness is still unconfirmed: each request asks it.
  reachable = true;
  for (let i = 0; i < 2; i++) {
    const response = await get();
    assert.equal(response.status, 200);
    await response.body?.cancel();
  }
  assert.equal(lookups, 4, "nothing was served from memory");
});
