/**
 * Revocation propagation between two keygate instances on one throwaway PostgreSQL cluster,
 * without the rest of the bench: the bench's revocation client (revocation.ts) over `--count`
 * fresh tokens, and beside it a bare listener in this process that times when PostgreSQL
 * delivers each notification, relative to A's acknowledgement (negative: before it). It tells a
 * notification delivered late from one processed late by B.
 *
 *     deno run --allow-all scripts/bench/revocation_probe.ts --count 200 [--pin 0]
 *
 * Latencies on a busy machine are noise in the tail: compare runs taken together.
 *
 * @module
 */
import { parseArgs } from "node:util";
import postgres from "postgres";
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { generateApiKey, generateToken, hashSecret } from "../../src/auth/credentials.ts";
import { toKeyPrefix } from "../../src/auth/credentials.ts";
import { generateSelfSigned } from "../../src/platform/tls.ts";
import { GRANT_CHANNEL } from "../../src/store/postgres/grant_epoch.ts";
import { percentile } from "./revocation.ts";
import { pinTo, type Server, startServer } from "./servers.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string", default: "200" },
    pin: { type: "string" },
    "max-pause": { type: "string", default: "50" },
  },
});
const count = Number(values.count);
const maxPauseMs = Number(values["max-pause"]);

const SECURE_PATH = "/api/secure/userservice/tokens/current";
const work = await Deno.makeTempDir({ prefix: "keygate-revocation-" });
const { cert, key } = await generateSelfSigned();
await Deno.writeTextFile(`${work}/cert.pem`, cert);
await Deno.writeTextFile(`${work}/key.pem`, key);
const cluster = await startPostgres({ alsoRemove: [work] });
const servers: Server[] = [];
try {
  const data = `${cluster.dir}/data`;
  await Deno.writeTextFile(`${data}/postgresql.auto.conf`, "fsync = on\nfull_page_writes = on\n", {
    append: true,
  });
  await cluster.pause();
  await cluster.resume();
  const url = await cluster.createDatabase("revocation");
  const store = await openPostgresStore(url);
  const now = Date.now();
  const user = await store.insertUser(
    { email: "probe@example.org", passwordHash: "unused", tokenTimeoutSeconds: null },
    { now, audit: undefined },
  );
  const apiKey = generateApiKey();
  const keyRow = await store.insertApiKey(
    { userId: user.id, keyHash: hashSecret(apiKey), prefix: toKeyPrefix(apiKey), label: "" },
    { now, audit: undefined },
  );
  const tokens: string[] = [];
  for (let i = 0; i <= count; i++) {
    const token = generateToken();
    await store.insertToken({
      tokenHash: hashSecret(token),
      userId: user.id,
      apiKeyId: keyRow.id,
      issuedAt: now,
      expiresAt: now + 3_600_000,
      maxLiveTokens: count + 1,
    }, { audit: undefined });
    tokens.push(token);
  }
  await store.closeStore();

  const start = (name: string) =>
    startServer(
      work,
      name,
      pinTo(values.pin, [
        Deno.execPath(),
        "run",
        "--allow-all",
        new URL("../../main.ts", import.meta.url).pathname,
        ...["--hostname", "127.0.0.1", "--port", "0", "--store", url],
        ...["--cert", `${work}/cert.pem`, "--key", `${work}/key.pem`, "--log-level", "info"],
      ]),
      /keygate listening on https:\/\/[^:]+:(\d+)\//,
    ).then((server) => (servers.push(server), server));
  const a = await start("a");
  const b = await start("b");

  const delivered: number[] = [];
  const listener = postgres(url, { max: 1, onnotice: () => {} });
  await listener.listen(GRANT_CHANNEL, () => delivered.push(performance.now()));

  const clientA = Deno.createHttpClient({ caCerts: [cert] });
  const clientB = Deno.createHttpClient({ caCerts: [cert] });
  const ask = async (client: Deno.HttpClient, target: string, method = "GET") => {
    const response = await fetch(target, { method, client });
    await response.arrayBuffer();
    return response.status;
  };
  const latencies: number[] = [];
  const notifyLags: number[] = [];
  const answered200: number[] = [];
  for (const [i, token] of tokens.entries()) {
    const path = `${SECURE_PATH}?api_key=${apiKey}&api_token=${token}`;
    for (let k = 0; k < 2; k++) {
      if (await ask(clientB, b.origin + path) !== 200) throw new Error("B refused a live token");
    }
    await new Promise((resolve) => setTimeout(resolve, Math.random() * maxPauseMs));
    const seen = delivered.length;
    if (await ask(clientA, a.origin + path, "DELETE") !== 204) throw new Error("A: no 204");
    const acknowledged = performance.now();
    let polls = 0;
    for (;;) {
      const status = await ask(clientB, b.origin + path);
      if (status === 401) break;
      if (status !== 200) throw new Error(`B answered ${status}`);
      polls++;
      if (performance.now() - acknowledged > 5000) throw new Error("B kept accepting");
    }
    const latency = performance.now() - acknowledged;
    // Wait for the bare listener's copy too (it may come after B's 401).
    for (let w = 0; w < 100 && delivered.length === seen; w++) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    if (i === 0) continue; // warm-up
    latencies.push(latency);
    answered200.push(polls);
    if (delivered.length > seen) notifyLags.push(delivered[seen] - acknowledged);
  }
  clientA.close();
  clientB.close();
  await listener.end({ timeout: 0 });
  const ms = (n: number) => `${n.toFixed(2)} ms`;
  const line = (name: string, xs: number[]) =>
    `${name}: n ${xs.length}, p50 ${ms(percentile(xs, 50))}, p90 ${ms(percentile(xs, 90))}, ` +
    `p99 ${ms(percentile(xs, 99))}, max ${ms(Math.max(...xs))}`;
  console.log(line("A's 204 to B's first 401", latencies));
  console.log(line("A's 204 to the bare listener's notification", notifyLags));
  console.log(
    `B's 200s after A's 204: ${answered200.reduce((x, y) => x + y, 0)} in all, at most ` +
      `${Math.max(...answered200)} for one token`,
  );
  const slow = latencies.map((latency, i) => ({
    latency,
    polls: answered200[i],
    lag: notifyLags[i],
  }))
    .filter((s) => s.latency > 10);
  for (const s of slow) {
    console.log(
      `  slow: ${ms(s.latency)}, B answered 200 ${s.polls} times, notification at ${ms(s.lag)}`,
    );
  }
} finally {
  for (const server of servers) await server.stop().catch(() => {});
  await cluster.stop();
}
