/**
 * The secure path's grant lookup on PostgreSQL, with concurrent lookups coalesced into one
 * statement: a miss of the grant cache costs keygate far more in the driver (building, sending
 * and parsing one query and its row) than PostgreSQL spends on the indexed join, so under load
 * many lookups share one round trip.
 *
 * Adaptive, with no timer: a lookup is sent at once while fewer than {@link MAX_IN_FLIGHT}
 * statements are under way (an idle server pays no wait); otherwise it waits for one of them to
 * come back, and all lookups that waited go together in the next statement (up to
 * {@link MAX_BATCH}). The busier the server, the larger the batches.
 *
 * One statement for any number of lookups (one prepared statement): the digests travel as one
 * `bytea` of 64-byte records (token digest, key digest), cut apart in SQL by position, since the
 * driver is set up without array types. Each record is looked up on its own through the tokens'
 * unique index (a LATERAL join), and a row names its record's position. The positions come from
 * a series of fixed length ({@link MAX_BATCH}, written into the statement) filtered by the batch's
 * size, not a series up to a parameter: the planner then estimates the statement alike for every
 * size and keeps one generic plan after its first executions. With the series' end a parameter,
 * it planned the statement afresh on every execution (its generic plan, estimated at a thousand
 * positions, never won against a custom one), which cost PostgreSQL more CPU than the lookups.
 *
 * Exactness: the statement runs after every lookup in it was asked, so it sees every write
 * committed before any of them (what the grant cache's epoch rule needs). It checks key
 * expiry at the earliest `now` of the batch, and each lookup then re-checks its key's expiry at
 * its own `now`: no lookup is answered more leniently than alone.
 *
 * @module
 */
import type postgres from "postgres";
import type { Row } from "../rows.ts";
import { toExpiryOrNull, toTokenFacts } from "../rows.ts";
import type { GrantLookup, TokenGrant } from "../store.ts";
import type { PgContext } from "./db.ts";
import { tokenValid } from "./rows.ts";

/** Statements of coalesced lookups under way at once, before lookups wait to be batched. */
export const MAX_IN_FLIGHT = 2;
/** Lookups in one statement at most. */
export const MAX_BATCH = 256;
/** Bytes of a SHA-256 digest. */
const DIGEST = 32;

/**
 * The statement of one batch: the grants of the first `count` 64-byte records of `records`
 * (token digest, key digest) that are valid at `now`, each row with its record's position `i`.
 */
export function selectGrants(
  sql: postgres.Sql,
  records: Uint8Array,
  count: number,
  now: number,
): Promise<Row[]> {
  return sql<Row[]>`SELECT l.i, t.id AS token_id, t.user_id, u.email, t.api_key_id, t.issued_at,
      least(t.expires_at, coalesce(k.expires_at, t.expires_at)) AS expires_at,
      k.expires_at AS key_expires_at
    FROM generate_series(0, ${sql.unsafe(String(MAX_BATCH - 1))}) AS l(i)
    CROSS JOIN LATERAL (SELECT substring(${records}::bytea FROM l.i * 64 + 1 FOR 32) AS token_hash,
      substring(${records}::bytea FROM l.i * 64 + 33 FOR 32) AS key_hash) AS h
    JOIN tokens t ON t.token_hash = h.token_hash
    JOIN api_keys k ON k.id = t.api_key_id AND k.key_hash = h.key_hash
    JOIN users u ON u.id = t.user_id
    WHERE l.i < ${count}::int AND ${tokenValid(sql, now)}`;
}

interface Waiting {
  lookup: GrantLookup;
  resolve(grant: TokenGrant | undefined): void;
  reject(error: unknown): void;
}

/** Creates the coalescing grant lookup over a store's context. */
export function createGrantReader(
  db: PgContext,
): (lookup: GrantLookup) => Promise<TokenGrant | undefined> {
  let waiting: Waiting[] = [];
  let inFlight = 0;

  async function send(batch: Waiting[]): Promise<void> {
    inFlight++;
    try {
      const records = new Uint8Array(batch.length * 2 * DIGEST);
      let now = Infinity;
      batch.forEach(({ lookup }, i) => {
        records.set(lookup.tokenHash, i * 2 * DIGEST);
        records.set(lookup.keyHash, i * 2 * DIGEST + DIGEST);
        now = Math.min(now, lookup.now);
      });
      const rows = await db.read((sql) => selectGrants(sql, records, batch.length, now));
      const found = new Array<TokenGrant | undefined>(batch.length);
      for (const row of rows) {
        const keyExpiresAt = toExpiryOrNull(row.key_expires_at);
        found[row.i as number] = { ...toTokenFacts(row), keyExpiresAt };
      }
      batch.forEach(({ lookup, resolve }, i) => {
        const grant = found[i];
        // The statement checked key expiry at the batch's earliest now; each at its own.
        const live = grant !== undefined &&
          (grant.keyExpiresAt === null || grant.keyExpiresAt > lookup.now);
        resolve(live ? grant : undefined);
      });
    } catch (error) {
      for (const { reject } of batch) reject(error);
    } finally {
      inFlight--;
      if (waiting.length > 0) flush();
    }
  }

  function flush(): void {
    const batch = waiting.length <= MAX_BATCH ? waiting : waiting.slice(0, MAX_BATCH);
    waiting = waiting.length <= MAX_BATCH ? [] : waiting.slice(MAX_BATCH);
    void send(batch);
  }

  return (lookup) => {
    if (lookup.tokenHash.length !== DIGEST || lookup.keyHash.length !== DIGEST) {
      // Not a SHA-256 digest: matches no row (every stored digest is one).
      return Promise.resolve(undefined);
    }
    return new Promise((resolve, reject) => {
      waiting.push({ lookup, resolve, reject });
      if (inFlight < MAX_IN_FLIGHT) flush();
    });
  };
}
