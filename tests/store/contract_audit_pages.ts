/**
 * The store contract for the admin API's audit search and the audit log's deletion in batches,
 * registered by `runStoreContract` (contract.ts) for every backend: filters combine, pages
 * neither repeat nor skip a row, a page with two filters scans a bounded window.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { AuditEntry } from "../../src/store/store.ts";
import { AUDIT_SCAN_ROWS } from "../../src/store/store_admin.ts";
import { type AdminContractTest, entry, T0 } from "./contract_admin.ts";

/** Pages of the audit log, and its deletion in batches. */
export function registerAuditPageTests(test: AdminContractTest): void {
  test("searchAuditPage() combines filters, pages newest first by time then id", async ({ store }) => {
    const rows: AuditEntry[] = [
      entry("user.added", "user:a@b.org", T0, "operator:ann"),
      entry("key.created", "api_key:1", T0 + 10, "operator:ann"),
      entry("user.added", "user:c@d.org", T0 + 20, "cli:root"),
      entry("key.revoked", "api_key:1", T0 + 30, "operator:bob"),
      entry("user.added", "user:e@f.org", T0 + 40, "operator:ann"),
      // Written later, with an earlier time (another instance's clock): sorted by its time.
      entry("user.added", "user:g@h.org", T0 + 15, "operator:ann"),
    ];
    for (const row of rows) await store.appendAudit(row);
    const all = await store.searchAudit({ limit: 10 });
    assert.deepEqual(all.map((r) => r.at), [T0 + 40, T0 + 30, T0 + 20, T0 + 15, T0 + 10, T0]);
    assert.deepEqual(all[0], { id: all[0].id, ...rows[4] });
    assert.equal((await store.searchAuditPage({ limit: 10 })).next, undefined);
    assert.deepEqual(
      (await store.searchAudit({ limit: 10, action: "user.added", actor: "operator:ann" }))
        .map((r) => r.subject),
      ["user:e@f.org", "user:g@h.org", "user:a@b.org"],
    );
    assert.deepEqual(
      (await store.searchAudit({ limit: 10, subject: "api_key:1" })).map((r) => r.action),
      ["key.revoked", "key.created"],
    );
    assert.deepEqual(
      (await store.searchAudit({ limit: 10, action: "key.revoked" })).map((r) => r.subject),
      ["api_key:1"],
    );
    assert.deepEqual(
      (await store.searchAudit({ limit: 10, from: T0 + 10, to: T0 + 30 })).map((r) => r.at),
      [T0 + 20, T0 + 15, T0 + 10],
    );
    // Every combination pages without repeating or skipping a row.
    const filters = [
      {},
      { actor: "operator:ann" },
      { action: "user.added" },
      { actor: "operator:ann", action: "user.added", from: T0 + 1 },
      { to: T0 + 35 },
    ];
    for (const filter of filters) {
      const whole = await store.searchAudit({ limit: 10, ...filter });
      const paged = [];
      let page = await store.searchAuditPage({ limit: 1, ...filter });
      for (let i = 0; i < 10; i++) {
        paged.push(...page.entries);
        if (page.next === undefined) break;
        page = await store.searchAuditPage({ limit: 1, ...filter, cursor: page.next });
      }
      assert.deepEqual(paged.map((r) => r.id), whole.map((r) => r.id), JSON.stringify(filter));
      assert.ok(whole.length > 0, JSON.stringify(filter));
    }
    // A cursor and `to` together: the earlier bound holds.
    const [, second] = all;
    assert.deepEqual(
      (await store.searchAudit({ limit: 10, to: T0 + 20, cursor: second })).map((r) => r.at),
      [T0 + 15, T0 + 10, T0],
    );
    assert.deepEqual(await store.searchAudit({ limit: 10, actor: "operator:nobody" }), []);
  });

  test("searchAuditPage() with two filters scans a bounded window and says where to go on", async ({ store, execSql }) => {
    // AUDIT_SCAN_ROWS + 5 rows of one actor and action, then (older) the one that matches.
    const values = Array.from(
      { length: AUDIT_SCAN_ROWS + 5 },
      (_, i) => `(${T0 + 10 + i}, 'operator:ann', 'user.added', 'user:x', '{}')`,
    );
    values.push(`(${T0}, 'operator:ann', 'user.disabled', 'user:y', '{}')`);
    await execSql(
      `INSERT INTO audit_log (at, actor, action, subject, detail) VALUES ${values.join(", ")}`,
    );
    const query = { actor: "operator:ann", action: "user.disabled", limit: 5 };
    const first = await store.searchAuditPage(query);
    assert.deepEqual(first.entries, [], "nothing in the first window");
    assert.ok(first.next, "a continuation");
    assert.equal(first.next.at, T0 + 10 + 5, "after the window's last scanned entry");
    const second = await store.searchAuditPage({ ...query, cursor: first.next });
    assert.deepEqual(second.entries.map((r) => r.subject), ["user:y"]);
    assert.equal(second.next, undefined);
    // Full pages go on from their last entry, as without a bound.
    const full = await store.searchAuditPage({ ...query, action: "user.added", limit: 3 });
    assert.deepEqual(
      full.entries.map((r) => r.at),
      [0, 1, 2].map((i) => T0 + 9 + AUDIT_SCAN_ROWS + 5 - i),
    );
    assert.deepEqual(full.next, { at: full.entries[2].at, id: full.entries[2].id });
  });

  test("deleteAuditBefore() deletes the oldest rows in batches; no other delete passes", async ({ store, execSql }) => {
    for (let i = 0; i < 5; i++) await store.appendAudit(entry("user.added", `user:${i}`, T0 + i));
    assert.equal(await store.deleteAuditBefore({ before: T0 + 3, size: 2 }), 2);
    assert.equal(await store.deleteAuditBefore({ before: T0 + 3, size: 2 }), 1);
    assert.equal(await store.deleteAuditBefore({ before: T0 + 3, size: 2 }), 0);
    assert.deepEqual((await store.listAudit()).map((r) => r.subject), ["user:3", "user:4"]);
    // The database itself still refuses any other delete, before and after a prune.
    await assert.rejects(execSql("DELETE FROM audit_log"), /append-only/);
    await assert.rejects(execSql(`DELETE FROM audit_log WHERE at < ${T0 + 100}`), /append-only/);
    assert.equal(await store.countRows("audit_log"), 2);
  });
}
