/**
 * Audit pages over 1,000,000 rows, on the backend `KEYGATE_TEST_STORE` names:
 * every combination of filters answers a page in under 5 ms (the median of
 * several runs), a filter that matches nothing included; the server on that
 * database keeps answering /healthz promptly while eight console views page
 * the log at once; and on SQLite each statement's plan reads through an index
 * without sorting the table. The rows are written in one SQL statement, so
 * seeding takes seconds.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import type { AuditQuery } from "../../src/store/store.ts";
import { toAuditSql } from "../../src/store/sqlite/audit_search.ts";
import { createOperator } from "../../src/auth/operators.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { openTestStore, querySqlAt, TEST_STORE_NAME } from "../_helpers/store.ts";
import { testCertificate } from "../_helpers/tls_server.ts";
import { startServerProcess } from "../_helpers/server_process.ts";

const ROWS = 1_000_000;
const T0 = Date.parse("2026-01-01T00:00:00Z");
const DAY = 86_400_000;

/** The queries of the console's views and of filters that match little or nothing. */
const QUERIES: Record<string, Omit<AuditQuery, "limit">> = {
  "newest": {},
  "by actor": { actor: "operator:ann" },
  "by action": { action: "key.revoked" },
  "by subject": { subject: "user:u123@example.org" },
  "by actor, miss": { actor: "operator:nobody" },
  "time range": { from: T0 + 2 * DAY, to: T0 + 3 * DAY },
  "time range, miss": { from: T0 - 2 * DAY, to: T0 - DAY },
  "actor and action, miss": { actor: "api_key:7", action: "operator.created" },
  "actor, action, time": { actor: "operator:ann", action: "user.added", from: T0 + DAY },
  "deep cursor": { cursor: { at: T0 + 1_000, id: 101 } },
};

/** `n` rows: mostly logins of 1000 keys by 5000 users, some operator changes, 1 s apart. */
function seedSql(dialect: "sqlite" | "postgres"): string {
  const select = `SELECT ${T0} + n * 1000,
      CASE WHEN n % 10 = 0 THEN 'operator:ann' ELSE 'api_key:' || (n % 1000) END,
      CASE WHEN n % 10 = 0 THEN 'user.added' WHEN n % 97 = 0 THEN 'key.revoked'
        ELSE 'token.issued' END,
      'user:u' || (n % 5000) || '@example.org', '{}'`;
  const columns = "INSERT INTO audit_log (at, actor, action, subject, detail)";
  return dialect === "sqlite"
    ? `${columns} WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ${ROWS})
       ${select} FROM c`
    : `${columns} ${select} FROM generate_series(1, ${ROWS}) AS n`;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

Deno.test({
  name: `[audit scale: ${TEST_STORE_NAME}] a page of 1,000,000 audit rows answers in under 5 ms ` +
    "and does not hold /healthz",
  sanitizeResources: false,
  async fn() {
    await using db = await openTestStore();
    if (TEST_STORE_NAME === "sqlite") {
      const raw = new DatabaseSync(db.path);
      raw.exec(seedSql("sqlite"));
      raw.exec("ANALYZE");
      raw.close();
    } else {
      await querySqlAt(db.path, seedSql("postgres"));
      await querySqlAt(db.path, "ANALYZE audit_log");
    }
    assert.equal(await db.store.countRows("audit_log"), ROWS);

    const timings: string[] = [];
    for (const [name, filter] of Object.entries(QUERIES)) {
      const query = { ...filter, limit: 50 };
      const page = await db.store.searchAuditPage(query); // warm: statements prepared
      const runs: number[] = [];
      for (let i = 0; i < 15; i++) {
        const start = performance.now();
        await db.store.searchAuditPage(query);
        runs.push(performance.now() - start);
      }
      timings.push(`${name}: ${median(runs).toFixed(2)} ms (${page.entries.length} rows)`);
      assert.ok(median(runs) < 5, `${name}: median ${median(runs).toFixed(2)} ms`);
    }
    console.log(timings.join("\n"));

    // The server on this database: eight console views paging the audit log at once, over
    // and over, while /healthz on the public port is timed (it was held for 0.76 s).
    const { token } = await createOperator(
      { store: db.store, clock: systemClock, actor: "cli:test" },
      "ann",
      "read",
    );
    const { cert, key } = await testCertificate();
    const dir = await Deno.makeTempDir();
    await Deno.writeTextFile(`${dir}/cert.pem`, cert);
    await Deno.writeTextFile(`${dir}/key.pem`, key);
    const server = await startServerProcess(db.path, [
      ...["--admin", "on", "--admin-port", "0"],
      ...["--cert", `${dir}/cert.pem`, "--key", `${dir}/key.pem`],
    ]);
    const clients = Array.from({ length: 9 }, () => Deno.createHttpClient({ caCerts: [cert] }));
    try {
      const health = async () => {
        const start = performance.now();
        const response = await fetch(`${server.origin}/healthz`, { client: clients[8] });
        await response.body?.cancel();
        assert.equal(response.status, 200);
        return performance.now() - start;
      };
      for (let i = 0; i < 5; i++) await health(); // connection and TLS set up
      const idle: number[] = [];
      for (let i = 0; i < 20; i++) idle.push(await health());
      const views = [
        "limit=25",
        "limit=25&actor=operator:ann",
        "limit=25&action=key.revoked",
        "limit=25&actor=api_key:7&action=operator.created",
        "limit=25&subject=user:u123@example.org",
        `limit=25&from=${new Date(T0 + DAY).toISOString()}`,
        "limit=25&action=user.added&actor=operator:ann",
        "limit=200",
      ];
      let loading = true;
      let pages = 0;
      const load = views.map(async (view, i) => {
        while (loading) {
          const response = await fetch(`${server.adminOrigin}/admin/v1/audit?${view}`, {
            client: clients[i],
            headers: { authorization: `Bearer ${token}` },
          });
          assert.equal(response.status, 200, view);
          await response.body?.cancel();
          pages++;
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const busy: number[] = [];
      for (let i = 0; i < 40; i++) busy.push(await health());
      loading = false;
      await Promise.all(load);
      const worst = Math.max(...busy);
      console.log(
        `/healthz idle median ${median(idle).toFixed(2)} ms; under ${views.length} audit ` +
          `views (${pages} pages) median ${median(busy).toFixed(2)} ms, worst ${
            worst.toFixed(2)
          } ms`,
      );
      // Not held behind a queue of audit pages (each took 370 ms; /healthz waited 760 ms). The
      // median, not the worst: on a machine shared with other tests a single answer can wait
      // for the CPU, whatever the server does.
      assert.ok(median(busy) < 100, `/healthz median ${median(busy).toFixed(2)} ms`);
    } finally {
      for (const client of clients) client.close();
      await server.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("[audit scale: sqlite] every combination of filters reads through an index", async () => {
  await using db = await openTestStore({});
  if (TEST_STORE_NAME !== "sqlite") return;
  const raw = new DatabaseSync(db.path);
  try {
    const names = ["actor", "action", "subject", "from", "to", "cursor"] as const;
    for (let mask = 0; mask < 1 << names.length; mask++) {
      const query: AuditQuery = { limit: 50 };
      names.forEach((name, i) => {
        if ((mask & (1 << i)) === 0) return;
        if (name === "cursor") query.cursor = { at: T0, id: 5 };
        else if (name === "from" || name === "to") query[name] = T0;
        else query[name] = "x";
      });
      for (const text of Object.values(toAuditSql(query))) {
        const params = Object.fromEntries(
          [...text.matchAll(/:([a-z_]+)/g)].map(([, name]) => [name, 1]),
        );
        const plan = (raw.prepare(`EXPLAIN QUERY PLAN ${text}`).all(params) as { detail: string }[])
          .map((row) => row.detail);
        const label = `${JSON.stringify(query)}: ${plan.join("; ")}`;
        // The table is read only through an index (or by rowid from the bounded scan)...
        for (const step of plan.filter((s) => / audit_log\b/.test(s))) {
          assert.match(step, /USING (COVERING )?INDEX audit_log_by_|INTEGER PRIMARY KEY/, label);
        }
        // ...in its order: a sort is only ever of the bounded scan's rows.
        if (!text.includes("WITH scan")) assert.ok(!plan.some((s) => /TEMP B-TREE/.test(s)), label);
      }
    }
  } finally {
    raw.close();
  }
});
