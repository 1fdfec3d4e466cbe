/**
 * What following another instance's grant-ending writes costs the instance that serves reads,
 * without wrk or TLS: instance A (this process) keeps a warm grant cache of tokens no write
 * touches and looks one up every millisecond, while instance B (a child process of this script,
 * on the same SQLite file or PostgreSQL database) ends other users' grants at a steady rate:
 * 8 token revocations, 1 key rotation and 1 revoke-all of a user in every 10 writes, like the
 * production mix of `deno task bench`. The same window runs once without writes; A's CPU time
 * (user + system) over the two windows gives A's CPU per change, and A's counters say what it did
 * for them: scopes learned, entries evicted, misses, and on PostgreSQL polls, empty polls, rows
 * per poll and notifications.
 *
 * Usage: deno task bench:follow [--store sqlite|postgres] [--rate N] [--seconds S]
 *
 * @module
 */
import process from "node:process";
import { MAX_OUTSTANDING } from "./bench/mix_traffic.ts";
import { parseArgs } from "node:util";
import { hashSecret } from "../src/auth/credentials.ts";
import { createGrantCache } from "../src/auth/grant_cache.ts";
import { openPostgresStore } from "../src/store/postgres/open_postgres_store.ts";
import { openSqliteStore } from "../src/store/sqlite/sqlite_store.ts";
import type { Store } from "../src/store/store.ts";
import { startPostgres } from "../tests/_helpers/postgres_cluster.ts";

const USAGE = "Usage: deno task bench:follow [--store sqlite|postgres] [--rate N] [--seconds S]";
const NOW = Date.parse("2026-01-01T00:00:00Z");
const NO_AUDIT = { audit: undefined };
/** Users whose tokens A keeps cached (HOT_TOKENS each), and users whose grants B ends. */
const HOT_USERS = 50;
const HOT_TOKENS = 20;
const VICTIMS = 100;
const VICTIM_TOKENS = 40;

const OPTIONS = {
  store: { type: "string", default: "sqlite" },
  rate: { type: "string", default: "1000" },
  seconds: { type: "string", default: "3" },
  /** Internal: run as instance B, writing into this location. */
  writer: { type: "string" },
  help: { type: "boolean", default: false },
} as const;

/** The flags; a mistake is one line and exit 2. */
function parseFlags() {
  try {
    return parseArgs({ args: Deno.args, options: OPTIONS }).values;
  } catch (error) {
    console.error(`bench:follow: ${(error as Error).message.split("\n")[0]}`);
    Deno.exit(2);
  }
}

const flags = parseFlags();
if (flags.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const rate = Number(flags.rate);
const seconds = Number(flags.seconds);
if (
  !["sqlite", "postgres"].includes(flags.store) || !(rate > 0) || !(seconds > 0)
) {
  console.error(
    "bench:follow: expected --store sqlite or postgres, and a positive --rate and --seconds",
  );
  Deno.exit(2);
}

function openAt(location: string): Promise<Store> | Store {
  return /^postgres/.test(location)
    ? openPostgresStore(location, { applicationName: "keygate-follow" })
    : openSqliteStore(location);
}

/** A user with one key and its tokens' ids. */
interface User {
  name: string;
  userId: number;
  keyId: number;
  tokenIds: number[];
}

/** A user with one key and `tokens` tokens, named `name`. */
async function addUser(store: Store, name: string, tokens: number): Promise<User> {
  const user = await store.insertUser(
    { email: `${name}@example.org`, passwordHash: "x", tokenTimeoutSeconds: null },
    { now: NOW, ...NO_AUDIT },
  );
  const key = await store.insertApiKey(
    { userId: user.id, keyHash: hashSecret(`key-${name}`), prefix: name, label: "" },
    { now: NOW, ...NO_AUDIT },
  );
  const tokenIds: number[] = [];
  for (let i = 0; i < tokens; i++) {
    tokenIds.push(
      await store.insertToken({
        tokenHash: hashSecret(`token-${name}-${i}`),
        userId: user.id,
        apiKeyId: key.id,
        issuedAt: NOW,
        expiresAt: NOW + 3_600_000,
        maxLiveTokens: 1000,
      }, NO_AUDIT),
    );
  }
  return { name, userId: user.id, keyId: key.id, tokenIds };
}

/** Instance B: ends the victims' grants at `rate` a second for `seconds`, then exits. */
async function runWriter(location: string): Promise<void> {
  const store = await openAt(location);
  const victims: User[] = [];
  const total = Math.round(rate * seconds);
  // Enough tokens that no token revocation finds its token revoked already: victim i % VICTIMS
  // takes every VICTIMS-th write, all of one kind.
  const perVictim = Math.max(VICTIM_TOKENS, Math.ceil(total / VICTIMS));
  for (let u = 0; u < VICTIMS; u++) victims.push(await addUser(store, `victim${u}`, perVictim));
  console.log("ready");
  const revoked = new Map<number, number>();
  const write = (i: number): Promise<unknown> => {
    const victim = victims[i % VICTIMS];
    if (i % 10 === 8) {
      return store.rotateApiKey(victim.keyId, {
        now: NOW,
        ...NO_AUDIT,
        successor: {
          userId: victim.userId,
          keyHash: hashSecret(`key-${i}`),
          prefix: "r",
          label: "",
        },
        oldKeyExpiresAt: NOW + 3_600_000,
      }).then((successor) => victim.keyId = successor.id);
    }
    if (i % 10 === 9) return store.revokeTokensOfUser(victim.userId, { now: NOW + i, ...NO_AUDIT });
    const next = revoked.get(victim.userId) ?? 0;
    revoked.set(victim.userId, next + 1);
    return store.revokeToken(victim.tokenIds[next], { now: NOW, ...NO_AUDIT });
  };
  const started = performance.now();
  const inFlight = new Set<Promise<unknown>>();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor((performance.now() - started) / 1000 * rate));
    while (sent < due && inFlight.size < MAX_OUTSTANDING) {
      const job = write(sent++).finally(() => inFlight.delete(job));
      inFlight.add(job);
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(inFlight);
  console.log(`done ${total} ${((performance.now() - started) / 1000).toFixed(2)}`);
  await store.closeStore();
}

const cpuMicros = () => {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
};

/** One lookup of a hot token every millisecond until `stop`; resolves to how many. */
async function lookUpEveryMs(find: (i: number) => unknown, stop: { now: boolean }) {
  let done = 0;
  while (!stop.now) {
    const found = find(done++);
    if (found instanceof Promise) await found;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return done;
}

if (flags.writer !== undefined) {
  await runWriter(flags.writer);
  Deno.exit(0);
}

const cluster = flags.store === "postgres" ? await startPostgres() : undefined;
const dir = await Deno.makeTempDir({ prefix: "keygate-follow-" });
const location = cluster === undefined
  ? `${dir}/follow.sqlite3`
  : await cluster.createDatabase("follow");
try {
  const a = await openAt(location);
  const hot: User[] = [];
  for (let u = 0; u < HOT_USERS; u++) hot.push(await addUser(a, `hot${u}`, HOT_TOKENS));
  const lookups = hot.flatMap((h) =>
    h.tokenIds.map((_, i) => [`key-${h.name}`, `token-${h.name}-${i}`] as const)
  );
  const cache = createGrantCache(a);
  for (const [key, token] of lookups) await cache(key, token, NOW + 1000);
  const find = (i: number) => cache(...lookups[i % lookups.length], NOW + 1000);

  // The same window without writes: A's CPU for its lookups and timers alone.
  let stop = { now: false };
  let cpu = cpuMicros();
  setTimeout(() => stop.now = true, seconds * 1000);
  const quietLookups = await lookUpEveryMs(find, stop);
  const quietCpu = cpuMicros() - cpu;

  const writer = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, "--writer", location, ...Deno.args],
    stdout: "piped",
  }).spawn();
  const lines = writer.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const readLine = async () => (await lines.read()).value ?? "";
  if (!(await readLine()).includes("ready")) throw new Error("The writer did not start");
  const before = { stats: cache.stats(), learned: a.readGrantInvalidations() };
  const pgBefore = "readGrantEpochStats" in a
    ? (a as unknown as { readGrantEpochStats(): Record<string, number> }).readGrantEpochStats()
    : undefined;
  stop = { now: false };
  cpu = cpuMicros();
  const busy = lookUpEveryMs(find, stop);
  const [, total, took] = (await readLine()).trim().split(" ");
  // Let A's last poll (PostgreSQL) or lookup (SQLite) learn the last writes.
  await new Promise((resolve) => setTimeout(resolve, 600));
  stop.now = true;
  const busyLookups = await busy;
  const busyCpu = cpuMicros() - cpu;
  await writer.status;
  const writes = Number(total);
  const after = { stats: cache.stats(), learned: a.readGrantInvalidations() };
  const perLookup = quietCpu / quietLookups;
  const extra = busyCpu - perLookup * busyLookups;
  console.log(
    `${flags.store}: B made ${writes} grant-ending writes in ${took} s; A learned ` +
      JSON.stringify(
        Object.fromEntries(
          Object.entries(after.learned).map(([k, v]) => [k, v - before.learned[k as "all"]]),
        ),
      ),
  );
  console.log(
    `A's cache: ${after.stats.misses - before.stats.misses} misses, entries evicted by scope ` +
      JSON.stringify(
        Object.fromEntries(
          Object.entries(after.stats.invalidated).map((
            [k, v],
          ) => [k, v - before.stats.invalidated[k as "all"]]),
        ),
      ) +
      `, ${after.stats.notKept - before.stats.notKept} not kept; ${after.stats.size} of the ` +
      `${lookups.length} hot tokens cached`,
  );
  if (pgBefore !== undefined) {
    const now = (a as unknown as { readGrantEpochStats(): Record<string, number> })
      .readGrantEpochStats();
    const polls = now.polls - pgBefore.polls;
    console.log(
      `A's polls: ${polls} (${(polls / Number(took)).toFixed(0)}/s), ` +
        `${now.emptyPolls - pgBefore.emptyPolls} empty, ` +
        `${((now.rowsRead - pgBefore.rowsRead) / Math.max(1, polls)).toFixed(1)} rows each; ` +
        `${now.notifications - pgBefore.notifications} notifications`,
    );
  }
  console.log(
    `A's CPU: ${perLookup.toFixed(1)} µs per lookup and timer without writes; ` +
      `${(extra / writes).toFixed(1)} µs more per write followed ` +
      `(${(extra / 1000 / Number(took)).toFixed(1)} ms of CPU a second at this rate)`,
  );
  await a.closeStore();
} finally {
  await cluster?.stop();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
