/**
 * Measures whether response times tell an unknown e-mail from a wrong
 * password (issue 4, "no enumeration"): sends interleaved token requests for
 * both cases (and for a disabled user and a revoked key) through the real
 * handler over a real store, and prints the median time of each case and the
 * gap between them. Exits 1 when the median gap between unknown e-mail and
 * wrong password is 5 ms or more. Then the same for the developer portal's sign-up,
 * sign-in and forgot-password, known against unknown e-mail (scripts/portal_timing.ts).
 * Both parts run on a temporary SQLite file, or with `--store postgres://…` on that
 * PostgreSQL database, which must hold no user (the run adds users, keys and accounts).
 *
 *     deno task timing [--requests 200] [--store postgres://…]
 *
 * Timing belongs in a script, not in unit tests: it depends on the machine.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { createHandler } from "../src/http/app.ts";
import { systemClock } from "../src/platform/clock.ts";
import { generateApiKey, hashSecret } from "../src/auth/credentials.ts";
import { silentLogger } from "../src/platform/logger.ts";
import { createPasswordHasher } from "../src/passwords/passwords.ts";
import { openSqliteStore } from "../src/store/sqlite/sqlite_store.ts";
import { openStore, parseStoreLocation } from "../src/store/open_store.ts";
import { redactCredentials } from "../src/store/store_url.ts";
import type { Store } from "../src/store/store.ts";
import type { ThrottleRules } from "../src/auth/throttle.ts";
import { measurePortalTiming } from "./portal_timing.ts";

/** The largest acceptable gap between the medians, in ms. */
export const MAX_MEDIAN_GAP_MS = 5;

// Throttling would turn the later requests into fast 429s; this measures the 401 path.
const UNTHROTTLED: ThrottleRules = {
  account: { threshold: 1e9, baseDelayMs: 1, maxDelayMs: 1, windowMs: 2 },
  client: { threshold: 1e9, baseDelayMs: 1, maxDelayMs: 1, windowMs: 2 },
};

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/** A usage mistake: one line, exit 2. */
class UsageError extends Error {}

/** The store the run measures on: what it is, and how to close it. */
interface TimingStore {
  store: Store;
  /** The first line printed: which backend. */
  description: string;
  close(): Promise<void>;
}

/** A temporary SQLite file, or the empty PostgreSQL database `url` names. */
async function openTimingStore(url: string | undefined): Promise<TimingStore> {
  if (url === undefined) {
    const dir = Deno.makeTempDirSync({ prefix: "keygate-timing-" });
    const store = openSqliteStore(`${dir}/keygate.sqlite3`);
    return {
      store,
      description: "store: SQLite, a temporary file",
      async close() {
        await store.closeStore();
        Deno.removeSync(dir, { recursive: true });
      },
    };
  }
  let location;
  try {
    location = parseStoreLocation(url);
  } catch (error) {
    throw new UsageError(`--store: ${(error as Error).message}`);
  }
  if (location.kind !== "postgres") {
    throw new UsageError("--store takes a postgres:// URL (without it: a temporary SQLite file)");
  }
  let store: Store;
  try {
    store = (await openStore(location)).store;
  } catch (error) {
    throw new Error(
      `cannot open the store ${location.display}: ${redactCredentials((error as Error).message)}`,
    );
  }
  const users = await store.countRows("users");
  if (users > 0) {
    await store.closeStore();
    throw new UsageError(
      `--store must name an empty database (${location.display} has ${users} users): ` +
        "the run adds users, keys and portal accounts to it",
    );
  }
  return {
    store,
    description: `store: PostgreSQL, ${location.display}`,
    close: () => store.closeStore(),
  };
}

async function main(args: string[]): Promise<number> {
  let values;
  try {
    values = parseArgs({
      args,
      options: { requests: { type: "string", default: "200" }, store: { type: "string" } },
    }).values;
  } catch (error) {
    console.error(`timing: ${(error as Error).message}`);
    return 2;
  }
  const requests = Number(values.requests);
  if (!Number.isInteger(requests) || requests < 2) {
    console.error("timing: --requests must be a whole number of at least 2");
    return 2;
  }
  let opened: TimingStore;
  try {
    opened = await openTimingStore(values.store);
  } catch (error) {
    console.error(`timing: ${(error as Error).message}`);
    return error instanceof UsageError ? 2 : 1;
  }
  const { store } = opened;
  const hasher = createPasswordHasher();
  try {
    console.log(opened.description);
    const now = Date.now();
    const addUser = async (email: string) => {
      const user = await store.insertUser({
        email,
        passwordHash: await hasher.hash("the right password"),
        tokenTimeoutSeconds: null,
      }, { now, audit: undefined });
      const key = generateApiKey();
      const row = await store.insertApiKey(
        { userId: user.id, keyHash: hashSecret(key), prefix: key.slice(0, 8), label: "" },
        { now, audit: undefined },
      );
      return { user, key, keyId: row.id };
    };
    const alice = await addUser("alice@example.org");
    const carol = await addUser("carol@example.org");
    await store.updateUserDisabled(carol.user.id, { disabled: true, now, audit: undefined });
    const revoked = await addUser("rita@example.org");
    await store.revokeApiKey(revoked.keyId, { now, audit: undefined });

    const handler = createHandler({
      store,
      hasher,
      clock: systemClock,
      logger: silentLogger,
      defaultTimeoutSeconds: 3600,
      throttleRules: UNTHROTTLED,
    });
    const body = (email: string, password: string, key: string) =>
      JSON.stringify({ auth_request: { user: { email, password }, api_key: key } });
    const cases: Record<string, string> = {
      "wrong password": body("alice@example.org", "a wrong password", alice.key),
      "unknown e-mail": body("nobody@example.org", "a wrong password", alice.key),
      "disabled user": body("carol@example.org", "the right password", carol.key),
      "revoked key": body("rita@example.org", "the right password", revoked.key),
    };
    const send = async (text: string) => {
      const started = performance.now();
      const response = await handler(
        new Request("https://keygate.test/api/userservice/tokens", {
          method: "POST",
          body: text,
          headers: { "content-type": "application/json" },
        }),
        { remoteAddr: { hostname: "192.0.2.1" } },
      );
      await response.arrayBuffer();
      const elapsed = performance.now() - started;
      if (response.status !== 401) throw new Error(`expected 401, got ${response.status}`);
      return elapsed;
    };

    // Warm up: JIT, the dummy hash, the database's caches.
    for (let i = 0; i < 10; i++) for (const text of Object.values(cases)) await send(text);

    // The two cases of the requirement alternate, in a random order within each pair, with the
    // other two cases sent in between but not counted toward the pair.
    const times: Record<string, number[]> = Object.fromEntries(
      Object.keys(cases).map((name) => [name, []]),
    );
    const pair = ["wrong password", "unknown e-mail"];
    for (let i = 0; i < requests / 2; i++) {
      const order = crypto.getRandomValues(new Uint8Array(1))[0] & 1 ? pair : [...pair].reverse();
      for (const name of order) times[name].push(await send(cases[name]));
      const extra = i % 2 ? "disabled user" : "revoked key";
      times[extra].push(await send(cases[extra]));
    }

    console.log("case            requests  median ms  p90 ms");
    for (const [name, list] of Object.entries(times)) {
      console.log(
        `${name.padEnd(16)}${String(list.length).padStart(8)}${
          median(list).toFixed(2).padStart(11)
        }${percentile(list, 0.9).toFixed(2).padStart(8)}`,
      );
    }
    const gap = Math.abs(median(times["wrong password"]) - median(times["unknown e-mail"]));
    const verdict = gap < MAX_MEDIAN_GAP_MS ? "ok" : "TOO LARGE";
    console.log(
      `median gap, unknown e-mail vs wrong password, over ${requests} interleaved requests: ` +
        `${gap.toFixed(3)} ms (limit ${MAX_MEDIAN_GAP_MS} ms): ${verdict}`,
    );
    // The portal's sign-up, sign-in and forgot-password (scripts/portal_timing.ts).
    const portal = await measurePortalTiming(store, hasher, {
      requests,
      maxGapMs: MAX_MEDIAN_GAP_MS,
    });
    return gap < MAX_MEDIAN_GAP_MS ? portal : 1;
  } finally {
    hasher.close();
    await opened.close();
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
