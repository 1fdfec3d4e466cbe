/**
 * The store contract for the admin API (operators, paged users, API keys, a user's tokens and
 * failed-login counters; audit search in contract_audit_pages.ts), registered by
 * `runStoreContract` (contract.ts) for every backend. Like the rest of the contract, each rule that lives in SQL
 * is pinned here: an operator name is unique only among operators not revoked,
 * a listed token is live by the same rule as a grant, filters combine, pages
 * neither repeat nor skip a row.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import type { AuditEntry, Store } from "../../src/store/store.ts";

/** What the contract's `test` gives a test: the store, and plain SQL on its database. */
export interface AdminContractStore {
  store: Store;
  execSql(sql: string): Promise<void>;
}

/** Registers one contract test (see contract.ts). */
export type AdminContractTest = (
  name: string,
  fn: (db: AdminContractStore) => Promise<void>,
) => void;

export const T0 = 1_000_000;
const HOUR = 3_600_000;
const NO_AUDIT = { audit: undefined };

/** An audit entry, by default an operator's at {@link T0}. */
export function entry(
  action: string,
  subject: string,
  at = T0,
  actor = "operator:ann",
): AuditEntry {
  return { at, actor, action, subject, detail: {} };
}

async function addUser(store: Store, email: string) {
  return await store.insertUser(
    { email, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    { now: T0, ...NO_AUDIT },
  );
}

/** Registers the admin-view tests with the contract's `test`. */
export function registerAdminViewTests(test: AdminContractTest): void {
  registerOperatorTests(test);
  registerUserAndTokenPageTests(test);
  registerKeyAndFailurePageTests(test);
}

/** Operators: inserted, found, revoked, unique. */
function registerOperatorTests(test: AdminContractTest): void {
  test("operators: inserted with their audit row, found by digest, revoked once", async ({ store }) => {
    const ann = await store.insertOperator(
      { name: "ann", role: "write", tokenHash: hashSecret("o1"), prefix: "kgo_abcd" },
      { now: T0, audit: (op) => entry("operator.created", `operator:${op.name}`) },
    );
    assert.deepEqual(ann, {
      id: ann.id,
      name: "ann",
      role: "write",
      prefix: "kgo_abcd",
      createdAt: T0,
      revokedAt: null,
    });
    assert.deepEqual(await store.findOperatorByHash(hashSecret("o1")), ann);
    assert.equal(await store.findOperatorByHash(hashSecret("o2")), undefined);
    const bob = await store.insertOperator(
      { name: "bob", role: "read", tokenHash: hashSecret("o2"), prefix: "kgo_efgh" },
      { now: T0 + 1, ...NO_AUDIT },
    );
    assert.deepEqual((await store.listOperators()).map((op) => op.name), ["ann", "bob"]);

    assert.equal(
      await store.revokeOperator(bob.id, {
        now: T0 + 5,
        audit: (done) => done ? entry("operator.revoked", "operator:bob") : undefined,
      }),
      true,
    );
    assert.equal(await store.revokeOperator(bob.id, { now: T0 + 6, ...NO_AUDIT }), false);
    assert.equal((await store.findOperatorByHash(hashSecret("o2")))?.revokedAt, T0 + 5);
    const audit = await store.listAudit();
    assert.deepEqual(audit.map((row) => row.action), ["operator.created", "operator.revoked"]);
  });

  test("operators: a name is unique among those not revoked, a digest among all", async ({ store }) => {
    const first = await store.insertOperator(
      { name: "ann", role: "read", tokenHash: hashSecret("o1"), prefix: "p" },
      { now: T0, ...NO_AUDIT },
    );
    await assert.rejects(
      store.insertOperator(
        { name: "ann", role: "write", tokenHash: hashSecret("o2"), prefix: "p" },
        { now: T0, audit: entry("operator.created", "operator:ann") },
      ),
      StoreConflict,
    );
    assert.equal(await store.countRows("audit_log"), 0, "a refused insert appends no audit row");
    await store.revokeOperator(first.id, { now: T0 + 1, ...NO_AUDIT });
    await assert.rejects(
      store.insertOperator(
        { name: "bob", role: "read", tokenHash: hashSecret("o1"), prefix: "p" },
        { now: T0, ...NO_AUDIT },
      ),
      StoreConflict,
    );
    const second = await store.insertOperator(
      { name: "ann", role: "write", tokenHash: hashSecret("o3"), prefix: "p" },
      { now: T0 + 2, ...NO_AUDIT },
    );
    assert.notEqual(second.id, first.id);
    assert.deepEqual((await store.listOperators()).map((op) => [op.name, op.revokedAt]), [
      ["ann", T0 + 1],
      ["ann", null],
    ]);
  });
}

/** Pages of users and of a user's tokens. */
function registerUserAndTokenPageTests(test: AdminContractTest): void {
  test("searchUsers() filters by e-mail text and pages by e-mail", async ({ store }) => {
    for (const email of ["carol@x.org", "alice@y.org", "bob@x.org", "dave@z.org"]) {
      await addUser(store, email);
    }
    const page1 = await store.searchUsers({ limit: 2 });
    assert.deepEqual(page1.map((u) => u.email), ["alice@y.org", "bob@x.org"]);
    const page2 = await store.searchUsers({ limit: 2, afterEmail: "bob@x.org" });
    assert.deepEqual(page2.map((u) => u.email), ["carol@x.org", "dave@z.org"]);
    assert.deepEqual(
      (await store.searchUsers({ limit: 10, search: "@X.ORG" })).map((u) => u.email),
      ["bob@x.org", "carol@x.org"],
    );
    // Text, not a pattern: LIKE's wildcards match nothing here.
    assert.deepEqual(await store.searchUsers({ limit: 10, search: "%" }), []);
    assert.deepEqual(await store.searchUsers({ limit: 10, search: "_" }), []);
  });

  test("searchTokensOfUser() pages newest first and tells live tokens by the grant rule", async ({ store, execSql }) => {
    const user = await addUser(store, "a@b.org");
    const other = await addUser(store, "c@d.org");
    const key = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k1"), prefix: "k1", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    const otherKey = await store.insertApiKey(
      { userId: other.id, keyHash: hashSecret("k2"), prefix: "k2", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    const ids: number[] = [];
    for (const [i, token] of ["t1", "t2", "t3", "t4"].entries()) {
      ids.push(
        await store.insertToken({
          tokenHash: hashSecret(token),
          userId: user.id,
          apiKeyId: key.id,
          issuedAt: T0 + i,
          expiresAt: i === 0 ? T0 + 10 : T0 + HOUR,
          maxLiveTokens: 100,
        }, NO_AUDIT),
      );
    }
    await store.insertToken({
      tokenHash: hashSecret("t9"),
      userId: other.id,
      apiKeyId: otherKey.id,
      issuedAt: T0,
      expiresAt: T0 + HOUR,
      maxLiveTokens: 100,
    }, NO_AUDIT);
    await store.revokeToken(ids[1], { now: T0 + 20, ...NO_AUDIT });
    const now = T0 + 100;
    const all = await store.searchTokensOfUser(user.id, { now, limit: 10 });
    assert.deepEqual(all.map((t) => [t.id, t.live]), [
      [ids[3], true],
      [ids[2], true],
      [ids[1], false], // revoked
      [ids[0], false], // expired
    ]);
    assert.deepEqual(all[1], {
      id: ids[2],
      apiKeyId: key.id,
      issuedAt: T0 + 2,
      expiresAt: T0 + HOUR,
      revokedAt: null,
      live: true,
    });
    assert.equal(all[2].revokedAt, T0 + 20);
    const page2 = await store.searchTokensOfUser(user.id, { now, limit: 2, beforeId: ids[2] });
    assert.deepEqual(page2.map((t) => t.id), [ids[1], ids[0]]);
    assert.deepEqual(
      (await store.searchTokensOfUser(user.id, { now, limit: 10, liveOnly: true })).map((t) =>
        t.id
      ),
      [ids[3], ids[2]],
    );
    // The key's and the user's state count, as for a grant.
    await execSql(`UPDATE api_keys SET disabled_at = ${T0 + 50} WHERE id = ${key.id}`);
    assert.deepEqual(
      (await store.searchTokensOfUser(user.id, { now, limit: 10 })).map((t) => t.live),
      [false, false, false, false],
    );
    await execSql(`UPDATE api_keys SET disabled_at = NULL WHERE id = ${key.id}`);
    await execSql(`UPDATE users SET tokens_valid_from = ${T0 + 3} WHERE id = ${user.id}`);
    assert.deepEqual(
      (await store.searchTokensOfUser(user.id, { now, limit: 10, liveOnly: true })).map((t) =>
        t.id
      ),
      [ids[3]],
    );
  });
}

/** Pages of API keys and of failed-login counters. */
function registerKeyAndFailurePageTests(test: AdminContractTest): void {
  test("searchApiKeys() pages by e-mail then id, filters by user and disuse", async ({ store, execSql }) => {
    const carol = await addUser(store, "carol@x.org");
    const alice = await addUser(store, "alice@x.org");
    const ids: number[] = [];
    for (
      const [user, secret] of [[carol, "k1"], [alice, "k2"], [carol, "k3"], [alice, "k4"]] as const
    ) {
      const key = await store.insertApiKey(
        { userId: user.id, keyHash: hashSecret(secret), prefix: secret, label: "" },
        { now: T0, ...NO_AUDIT },
      );
      ids.push(key.id);
    }
    const order = [ids[1], ids[3], ids[0], ids[2]];
    const all = await store.searchApiKeys({ limit: 10 });
    assert.deepEqual(all.map((k) => k.id), order);
    assert.equal(all[0].email, "alice@x.org");
    const paged = [];
    let after: { email: string; id: number } | undefined;
    for (let i = 0; i < 5; i++) {
      const page = await store.searchApiKeys({ limit: 1, after });
      if (page.length === 0) break;
      paged.push(page[0].id);
      after = { email: page[0].email, id: page[0].id };
    }
    assert.deepEqual(paged, order);
    assert.deepEqual(
      (await store.searchApiKeys({ userId: carol.id, limit: 10 })).map((k) => k.id),
      [ids[0], ids[2]],
    );
    await execSql(`UPDATE api_keys SET last_used_at = ${T0 + HOUR} WHERE id = ${ids[0]}`);
    await execSql(`UPDATE api_keys SET revoked_at = ${T0} WHERE id = ${ids[1]}`);
    assert.deepEqual(
      (await store.searchApiKeys({ unusedSince: T0 + 1, limit: 10 })).map((k) => k.id),
      [ids[3], ids[2]],
    );
  });

  test("searchLoginFailures() pages the longest-blocked first, with a key's owner", async ({ store }) => {
    const user = await addUser(store, "a@b.org");
    const key = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k1"), prefix: "k1", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    const counters = [
      [`key:${key.id}`, T0 + 50],
      ["client:192.0.2.1", 0],
      ["client:192.0.2.2", T0 + 90],
      ["client:192.0.2.3", 0],
      ["key:999", T0 + 50],
    ] as const;
    for (const [subject, blockedUntil] of counters) {
      await store.recordLoginFailures([subject], {
        now: T0,
        audit: undefined,
        next: () => ({
          subject,
          failures: 1,
          lastFailureAt: T0,
          blockedUntil,
          forgetAt: T0 + HOUR,
        }),
      });
    }
    const order = [
      "client:192.0.2.2",
      `key:${key.id}`,
      "key:999",
      "client:192.0.2.1",
      "client:192.0.2.3",
    ];
    const all = await store.searchLoginFailures({ now: T0, limit: 10 });
    assert.deepEqual(all.map((c) => c.subject), order);
    assert.deepEqual(all.map((c) => c.email), [
      undefined,
      "a@b.org",
      undefined,
      undefined,
      undefined,
    ]);
    const paged = [];
    let after: { blockedUntil: number; subject: string } | undefined;
    for (let i = 0; i < 6; i++) {
      const [row] = await store.searchLoginFailures({ now: T0, limit: 1, after });
      if (row === undefined) break;
      paged.push(row.subject);
      after = { blockedUntil: row.blockedUntil, subject: row.subject };
    }
    assert.deepEqual(paged, order);
    assert.equal(await store.countBlockedSubjects(T0), 3);
    assert.equal(await store.countBlockedSubjects(T0 + 60), 1);
    assert.deepEqual(await store.searchLoginFailures({ now: T0 + HOUR, limit: 10 }), []);
  });
}
