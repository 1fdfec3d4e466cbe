/**
 * The production mix's data (scripts/bench/production_mix.ts): tokens seeded into a SQLite file,
 * the tenth in use written for wrk's Lua script in a shuffled popularity order, the other users
 * sampled as the victims whose grants the mix ends, and the same data copied into PostgreSQL.
 *
 * @module
 */
import type { PostgresCluster } from "../../tests/_helpers/postgres_cluster.ts";
import { type Victim, VICTIM_TOKENS } from "./mix_traffic.ts";
import { seedDatabase, type SeedEntry } from "./seed.ts";
import { copySeedToPostgres, runStatements } from "./seed_postgres.ts";

/** The popularity's exponent: the k-th most used token gets a share ∝ 1/k^α. */
export const ZIPF_ALPHA = 1.0;

/** What seeding needs from the section's context. */
export interface MixSeedContext {
  work: string;
  tokens: number;
  passwordHash: string;
  log(message: string): void;
  notes: string[];
}

/** The seeded SQLite file, wrk's token list and the users whose grants the mix ends. */
export interface MixSeed {
  dbPath: string;
  /** The tokens in use, one `apiKey token email` a line, in popularity order. */
  pairs: string;
  /** How many: `pairs`' lines. */
  inUse: number;
  /**
   * The working-set row's tokens: twice as many (those in use, then as many more), in a
   * popularity order of their own, against a cache of `inUse` entries.
   */
  widePairs: string;
  victims: Victim[];
  /** Users with a key and no token, for the logins. */
  issuers: SeedEntry[];
}

/** Seeds `ctx.tokens` tokens: every token of the first users in use, some of every other's. */
export async function seedMix(ctx: MixSeedContext): Promise<MixSeed> {
  const inUse = Math.min(100_000, Math.floor(ctx.tokens / 10));
  const perUser = 100; // seed.ts: one user and one key per 100 tokens (the live-token cap)
  ctx.log(`production mix: seeding ${ctx.tokens.toLocaleString("en")} tokens`);
  const started = performance.now();
  const dbPath = `${ctx.work}/mix.sqlite3`;
  // In use: every token of the first users. Victims: some tokens of every other user.
  const seeded = await seedDatabase(dbPath, {
    tokens: ctx.tokens,
    sample: 0,
    passwordHash: ctx.passwordHash,
    select: (i) => i < 2 * inUse || i % perUser < VICTIM_TOKENS,
  });
  const seedSeconds = (performance.now() - started) / 1000;
  // Sorted by popularity as the Lua script reads them: a shuffled order, so that the hot
  // tokens are spread over users and keys.
  const pairs = await writeShuffled(`${ctx.work}/mix.pairs`, seeded.sample.slice(0, inUse));
  const widePairs = await writeShuffled(
    `${ctx.work}/mix_wide.pairs`,
    seeded.sample.slice(0, 2 * inUse),
  );
  // Users are numbered from 1 in seeding order, each with one key of the same number.
  const victims: Victim[] = [];
  seeded.sample.slice(2 * inUse).forEach((entry, i) => {
    if (i % VICTIM_TOKENS === 0) {
      const userId = 2 * inUse / perUser + i / VICTIM_TOKENS + 1;
      victims.push({ apiKey: entry.apiKey, tokens: [], userId, keyId: userId });
    }
    victims.at(-1)!.tokens.push(entry.token);
  });
  ctx.notes.push(
    `Production mix: ${ctx.tokens.toLocaleString("en")} tokens seeded through the store in ` +
      `${seedSeconds.toFixed(0)} s; ${inUse.toLocaleString("en")} in use, Zipf α ${ZIPF_ALPHA}.`,
  );
  return { dbPath, pairs, inUse, widePairs, victims, issuers: seeded.issuers };
}

/** Writes `entries` in a random order, one `apiKey token email` a line; resolves to the path. */
async function writeShuffled(path: string, entries: SeedEntry[]): Promise<string> {
  const shuffled = [...entries];
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
  }
  await Deno.writeTextFile(
    path,
    shuffled.map((e) => `${e.apiKey} ${e.token} ${e.email}`).join("\n"),
  );
  return path;
}

/**
 * The share of requests an oracle holding exactly the `cached` most popular of `keys` keys would
 * answer from memory under a Zipf popularity of exponent `alpha` (the "hot set's share").
 */
export function zipfHotShare(keys: number, cached: number, alpha = ZIPF_ALPHA): number {
  let [hot, all] = [0, 0];
  for (let rank = 1; rank <= keys; rank++) {
    const weight = 1 / rank ** alpha;
    all += weight;
    if (rank <= cached) hot += weight;
  }
  return hot / all;
}

/** Copies the seed into a new database of `cluster`, durable as in production; its URL. */
export async function copyMixToPostgres(
  ctx: MixSeedContext,
  cluster: PostgresCluster,
  dbPath: string,
): Promise<string> {
  const url = await cluster.createDatabase("mix");
  ctx.log("production mix: copying into PostgreSQL");
  await copySeedToPostgres(dbPath, url);
  await runStatements(url, [
    "ALTER SYSTEM SET fsync = 'on'",
    "ALTER SYSTEM SET full_page_writes = 'on'",
  ]);
  await cluster.pause();
  await cluster.resume();
  return url;
}

/**
 * A copy of the mix's database `url` in the same cluster (`CREATE DATABASE … TEMPLATE`: nothing
 * may be connected to it meanwhile), named after it with `_` and `suffix`; its URL.
 */
export async function cloneMixDatabase(
  cluster: PostgresCluster,
  url: string,
  suffix: "limits" | "control",
): Promise<string> {
  const source = new URL(url).pathname.slice(1);
  const name = `${source}_${suffix}`;
  await runStatements(cluster.urlOf("postgres"), [
    `CREATE DATABASE "${name}" TEMPLATE "${source}" STRATEGY FILE_COPY`,
  ]);
  return cluster.urlOf(name);
}
