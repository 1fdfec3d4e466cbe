import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { createRevocation } from "../../src/auth/revocation.ts";
import { openDomainFixture } from "./_domain.ts";

const TOKEN = "a".repeat(40);

Deno.test("revokeTokenOfKey() revokes a token only for the key it was issued with", async () => {
  await using f = await openDomainFixture();
  const revocation = createRevocation({ store: f.test.store, clock: f.clock });
  const ann = await f.addUser("ann@example.org");
  const annKey = await f.addKey(ann);
  const otherKey = await f.addKey(ann);
  const tokenId = await f.addToken(ann, annKey, TOKEN);
  const by = (apiKeyId: number) => ({ apiKeyId, email: ann.email, clientAddress: "192.0.2.1" });

  assert.equal(await revocation.revokeTokenOfKey(TOKEN, by(otherKey.id)), undefined);
  assert.equal((await f.test.store.findTokenStatus(hashSecret(TOKEN), f.clock.now()))!.live, true);
  assert.equal(await revocation.revokeTokenOfKey(TOKEN, by(annKey.id)), tokenId);
  assert.equal((await f.test.store.findTokenStatus(hashSecret(TOKEN), f.clock.now()))!.live, false);
  // Revoked already, or never issued: nothing changes, nothing is audited again.
  assert.equal(await revocation.revokeTokenOfKey(TOKEN, by(annKey.id)), undefined);
  assert.equal(await revocation.revokeTokenOfKey("b".repeat(40), by(annKey.id)), undefined);
  const audit = (await f.test.store.listAudit()).filter((row) => row.action === "token.revoked");
  assert.equal(audit.length, 1);
  assert.equal(audit[0].actor, `api_key:${annKey.id}`);
});

Deno.test("revokeOwnToken() revokes the caller's token once", async () => {
  await using f = await openDomainFixture();
  const revocation = createRevocation({ store: f.test.store, clock: f.clock });
  const ann = await f.addUser("ann@example.org");
  const key = await f.addKey(ann);
  const tokenId = await f.addToken(ann, key, TOKEN);
  const by = { apiKeyId: key.id, email: ann.email, clientAddress: "192.0.2.1" };
  assert.equal(await revocation.revokeOwnToken(tokenId, by), true);
  assert.equal(await revocation.revokeOwnToken(tokenId, by), false);
  assert.equal(await f.test.store.countLiveTokens(f.clock.now()), 0);
});
