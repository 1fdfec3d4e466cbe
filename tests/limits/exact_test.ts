/**
 * Limits are exact across request workers, processes and instances: real server processes over
 * real TLS, 64 concurrent keep-alive connections on one key spread over every listener. A quota
 * of 1,000 answers exactly 1,000 times 200 (at most 1% fewer) and every other answer is 429; a
 * rate admits at most its limit in each window (judged by client times that fall inside one
 * window) and at least 99% of it in each window the run covers. On 2 instances × 2 workers on
 * one PostgreSQL, and 3 processes on one SQLite file. The limits are set through the admin CLI,
 * as an operator does.
 *
 * @module
 */
import assert from "node:assert/strict";
import { runAdmin, runAdminProcess } from "../_helpers/admin_cli.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { testCertificate } from "../_helpers/tls_server.ts";
import { POSTGRES_SKIP, sharedPostgres } from "../_helpers/postgres_cluster.ts";
import {
  addUserWithKey,
  type ServerProcess,
  startServerProcess,
} from "../_helpers/server_process.ts";

const PASSWORD = "limits test pw";
const CURRENT = "/api/secure/userservice/tokens/current";
const CONNECTIONS = 64;

interface Answer {
  /** The API key the request came with. */
  apiKey: string;
  status: number;
  sentAt: number;
  receivedAt: number;
}

async function issueToken(cert: string, origin: string, apiKey: string): Promise<string> {
  const client = Deno.createHttpClient({ caCerts: [cert] });
  try {
    const response = await fetch(`${origin}/api/userservice/tokens`, {
      method: "POST",
      client,
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({
        auth_request: { user: { email: "ops@example.org", password: PASSWORD }, api_key: apiKey },
      }),
    });
    const body = await response.text();
    assert.equal(response.status, 200, body);
    return JSON.parse(body).auth_response.access_token;
  } finally {
    client.close();
  }
}

/**
 * 64 connections (one client each, kept alive), spread over `origins`, send secure requests
 * until `until()` says stop; every answer with its client times.
 */
async function hammer(
  cert: string,
  origins: string[],
  headers: Record<string, string> | ((connection: number) => Record<string, string>),
  until: (sent: number, now: number) => boolean,
): Promise<Answer[]> {
  const headersOf = typeof headers === "function" ? headers : () => headers;
  const answers: Answer[] = [];
  let sent = 0;
  await Promise.all(Array.from({ length: CONNECTIONS }, async (_, i) => {
    const client = Deno.createHttpClient({ caCerts: [cert] });
    const url = `${origins[i % origins.length]}${CURRENT}`;
    try {
      while (!until(sent, Date.now())) {
        sent++;
        const sentAt = Date.now();
        const chosen = headersOf(i);
        const apiKey = chosen["x-api-key"];
        const response = await fetch(url, { client, headers: chosen });
        await response.body?.cancel();
        answers.push({ apiKey, status: response.status, sentAt, receivedAt: Date.now() });
      }
    } finally {
      client.close();
    }
  }));
  return answers;
}

function countBy(answers: Answer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

/** Servers on one store, a user with a key and a token, and `limit` set through the admin CLI. */
async function serve(
  store: string,
  files: string,
  layout: { processes: number; workers: number },
  limit: string[],
) {
  const { cert, key } = await testCertificate();
  await Deno.writeTextFile(`${files}/cert.pem`, cert);
  await Deno.writeTextFile(`${files}/key.pem`, key);
  const apiKey = await addUserWithKey(store, "ops@example.org", PASSWORD);
  const set = await runAdmin(store, ["limit", "set", apiKey.slice(0, 8), ...limit]);
  assert.equal(set.code, 0, set.err);
  const servers: ServerProcess[] = [];
  try {
    for (let i = 0; i < layout.processes; i++) {
      servers.push(
        await startServerProcess(store, [
          "--cert",
          `${files}/cert.pem`,
          "--key",
          `${files}/key.pem`,
          ...(layout.workers > 1 ? ["--workers", String(layout.workers)] : []),
        ]),
      );
    }
  } catch (error) {
    await Promise.all(servers.map((server) => server.stop()));
    throw error;
  }
  const token = await issueToken(cert, servers[0].origin, apiKey);
  return {
    cert,
    apiKey,
    issueToken: (key: string) => issueToken(cert, servers[0].origin, key),
    origins: servers.map((server) => server.origin),
    headers: { "x-api-key": apiKey, authorization: `Bearer ${token}`, accept: "application/json" },
    async [Symbol.asyncDispose]() {
      const stopped = await Promise.all(servers.map((server) => server.stop()));
      for (const status of stopped) assert.equal(status.code, 0);
    },
  };
}

async function assertQuotaExact(
  store: string,
  files: string,
  layout = { processes: 2, workers: 2 },
) {
  await using servers = await serve(store, files, layout, ["--quota", "1000"]);
  const answers = await hammer(
    servers.cert,
    servers.origins,
    servers.headers,
    (sent) => sent >= 1600,
  );
  const counts = countBy(answers);
  const ok = counts[200] ?? 0;
  assert.ok(ok <= 1000 && ok >= 990, `200 answers: ${ok} (${JSON.stringify(counts)})`);
  assert.deepEqual(counts, { 200: ok, 429: 1600 - ok });
  const usage = await runAdmin(store, ["limit", "usage", servers.apiKey.slice(0, 8), "--json"]);
  assert.equal(usage.code, 0, usage.err);
  const [row] = JSON.parse(usage.out);
  assert.equal(row.limit, "1000");
  assert.ok(row.used >= ok && row.used <= 1000, `stored use ${row.used}`);
}

/**
 * A quota holds across its key's rotation under load. A key with a quota of 3,000 and 5,000
 * requests. After 200 of them the key is rotated through the admin CLI (`deno task admin key
 * rotate`, a day's grace) while the old key's load goes on, up to 1,500 requests at most (so that
 * budget is left for both keys whatever the rotation's speed); once the successor has a token,
 * every other connection uses it and the rest keep the old key, up to 5,000 in all. Both keys
 * count against the one quota, which the rotation moved to the successor with what it had used:
 * never more than 3,000 answers 200 over both keys. Units that threads still held when the load
 * stopped come back with the idle return: after a pause, 500 more requests bring the 200s to the
 * quota (at most 1% fewer).
 */
async function assertQuotaExactAcrossRotation(
  store: string,
  files: string,
  layout = { processes: 2, workers: 2 },
) {
  const QUOTA = 3000;
  await using servers = await serve(store, files, layout, ["--quota", String(QUOTA)]);
  const rotate = async () => {
    // As a process: the rotation's grace runs on the real clock.
    const rotated = await runAdminProcess(store, ["key", "rotate", servers.apiKey.slice(0, 8)]);
    assert.equal(rotated.code, 0, rotated.err);
    const apiKey = rotated.out.trim().split("\n").at(-1)!;
    const token = await servers.issueToken(apiKey);
    return { ...servers.headers, "x-api-key": apiKey, authorization: `Bearer ${token}` };
  };
  let rotation: Promise<Record<string, string>> | undefined;
  let next: Record<string, string> | undefined;
  const during = await hammer(servers.cert, servers.origins, servers.headers, (sent) => {
    if (sent >= 200 && rotation === undefined) {
      rotation = rotate();
      rotation.then((headers) => next = headers, () => {});
    }
    return next !== undefined || sent >= 1500;
  });
  next = await rotation!;
  const successor = next;
  const both = await hammer(
    servers.cert,
    servers.origins,
    (connection) => connection % 2 === 1 ? successor : servers.headers,
    (sent) => sent >= 5000 - during.length,
  );
  const load = [...during, ...both];
  assert.ok(
    both.some((a) => a.apiKey === successor["x-api-key"] && a.status === 200),
    "the successor was not admitted",
  );
  // The idle return runs every half second for units unused for a second: 2 s is past both.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const after = await hammer(
    servers.cert,
    servers.origins,
    (connection) => connection % 2 === 1 ? successor : servers.headers,
    (sent) => sent >= 500,
  );
  const counts = countBy([...load, ...after]);
  const ok = counts[200] ?? 0;
  const report = `200 answers: ${ok} (under load ${countBy(load)[200] ?? 0}, ` +
    `${during.length} before the successor's first)`;
  assert.ok(ok <= QUOTA && ok >= QUOTA * 0.99, report);
  assert.deepEqual(counts, { 200: ok, 429: load.length + 500 - ok });
  // Both keys report the one quota, now the successor's.
  for (const apiKey of [successor["x-api-key"], servers.apiKey]) {
    const usage = await runAdmin(store, ["limit", "usage", apiKey.slice(0, 8), "--json"]);
    assert.equal(usage.code, 0, usage.err);
    const [row] = JSON.parse(usage.out);
    assert.equal(row.limit, String(QUOTA));
    assert.ok(row.used >= ok && row.used <= QUOTA, `stored use ${row.used}`);
  }
}

async function assertRateExact(
  store: string,
  files: string,
  layout = { processes: 2, workers: 2 },
) {
  const RATE = 60;
  await using servers = await serve(store, files, layout, ["--rate", `${RATE}/second`]);
  // Start just after a window begins; run through three whole windows and a bit of a fourth.
  const begin = Math.ceil((Date.now() + 200) / 1000) * 1000;
  await new Promise((resolve) => setTimeout(resolve, begin - Date.now() + 20));
  const end = begin + 3_000 + 300;
  const answers = await hammer(
    servers.cert,
    servers.origins,
    servers.headers,
    (_, now) => now >= end,
  );
  const counts = countBy(answers);
  assert.deepEqual(Object.keys(counts).sort(), ["200", "429"], JSON.stringify(counts));
  const oks = answers.filter((a) => a.status === 200);
  for (let start = begin; start < begin + 3_000; start += 1000) {
    const certain = oks.filter((a) => a.sentAt >= start && a.receivedAt < start + 1000).length;
    const possible = oks.filter((a) => a.receivedAt >= start && a.sentAt < start + 1000).length;
    assert.ok(certain <= RATE, `window ${start}: ${certain} certain 200s > ${RATE}`);
    assert.ok(possible >= RATE * 0.99, `window ${start}: only ${possible} 200s of ${RATE}`);
  }
  const windows = Math.floor(Math.max(...answers.map((a) => a.receivedAt)) / 1000) -
    Math.floor(Math.min(...answers.map((a) => a.sentAt)) / 1000) + 1;
  assert.ok(oks.length <= RATE * windows, `${oks.length} 200s in ${windows} windows`);
}

/** A check of exactness on servers over `store`, their files in `files`. */
type Exactness = (
  store: string,
  files: string,
  layout?: { processes: number; workers: number },
) => Promise<void>;

/** Each check on 3 processes on one SQLite file, and on 2 instances × 2 workers on PostgreSQL. */
const CHECKS: [string, Exactness][] = [
  ["a quota of 1,000 answers 1,000 times 200, every other 429", assertQuotaExact],
  ["a rate of 60/second admits its limit in every window", assertRateExact],
  ["a quota holds across the key's rotation under load", assertQuotaExactAcrossRotation],
];

for (const [name, check] of CHECKS) {
  Deno.test({
    name: `[server] 3 processes on one SQLite file: ${name}`,
    sanitizeResources: false,
    async fn() {
      const db = tempDbPath();
      try {
        await check(db.path, db.dir, { processes: 3, workers: 1 });
      } finally {
        db.cleanup();
      }
    },
  });

  Deno.test({
    name: `[pg e2e] 2 instances × 2 workers on one PostgreSQL: ${name}`,
    ignore: POSTGRES_SKIP !== false,
    sanitizeResources: false,
    async fn() {
      const url = await (await sharedPostgres()).createDatabase("limits");
      const files = await Deno.makeTempDir();
      try {
        await check(url, files);
      } finally {
        await Deno.remove(files, { recursive: true });
      }
    },
  });
}
