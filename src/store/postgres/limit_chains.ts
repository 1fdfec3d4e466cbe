/**
 * Rotation chains on PostgreSQL: which key's limits and counters a key uses. A rotation moves a
 * key's own limits and its counters to the successor (api_keys.ts), so a lease, a usage report and
 * a return of a rotated key follow `replaced_by` to the chain's last key (docs/architecture.md,
 * "Rotation"). SQLite's walk is in its limits.ts, one prepared read a hop.
 *
 * @module
 */
import type postgres from "postgres";
import { TooLongChain } from "../limit_lease.ts";
import type { Row } from "../rows.ts";
import { toIdArray } from "./rows.ts";
import type { LimitReturn } from "../store.ts";
import { MAX_CHAIN_WALK } from "../store_limits.ts";

/**
 * Walks `next` (key → its successor) from `id` to the last key of its rotation chain, at most
 * {@link MAX_CHAIN_WALK} hops; `undefined` past them.
 */
function toChainEnd(next: ReadonlyMap<number, number | null>, id: number): number | undefined {
  let end = id;
  for (let hop = 0;; hop++) {
    const successor = next.get(end);
    if (successor === undefined || successor === null) return end;
    if (hop === MAX_CHAIN_WALK) return undefined;
    end = successor;
  }
}

/**
 * The key whose limits and counters each of `ids` uses: the last of its rotation chain, the key
 * itself if it was never rotated or is gone. One statement a hop (the ids in one array parameter,
 * {@link toIdArray}).
 *
 * With `hold` (a lease), every key of the chains is held `FOR KEY SHARE` until the transaction
 * ends, before its successor is read: a rotation (which locks the old key `FOR UPDATE`) is then
 * wholly before the lease, whose walk sees its successor, or after it, and moves the counters the
 * lease wrote. A hop at a time, each in id order. No deadlock: the only other `FOR UPDATE` of keys
 * is a user's deletion, in id order, and a chain is one user's, whose lowest key the lease holds
 * first (the key-usage flush locks `FOR NO KEY UPDATE`, api_keys.ts).
 *
 * A key more than {@link MAX_CHAIN_WALK} rotations behind (made by hand) fails a lease; a report or
 * a return then uses the key itself (a return to a counter that moved on finds none).
 *
 * @throws {TooLongChain} with `hold`, for a chain that long.
 */
export async function toLimitKeys(
  sql: postgres.Sql | postgres.TransactionSql,
  ids: readonly number[],
  hold: boolean,
): Promise<Map<number, number>> {
  const next = new Map<number, number | null>();
  let pending = [...new Set(ids)];
  for (let hop = 0; hop <= MAX_CHAIN_WALK && pending.length > 0; hop++) {
    const found = await sql<Row[]>`SELECT k.id, k.replaced_by FROM api_keys k
      WHERE k.id = ANY(${toIdArray(pending)}::bigint[])
      ORDER BY k.id ${hold ? sql`FOR KEY SHARE OF k` : sql``}`;
    for (const id of pending) next.set(id, null);
    for (const row of found) {
      next.set(Number(row.id), row.replaced_by === null ? null : Number(row.replaced_by));
    }
    pending = [
      ...new Set(
        found.filter((row) => row.replaced_by !== null).map((row) => Number(row.replaced_by)),
      ),
    ].filter((id) => !next.has(id));
  }
  return new Map(ids.map((id) => {
    const end = toChainEnd(next, id);
    if (end === undefined && hold) throw new TooLongChain(id);
    return [id, end ?? id];
  }));
}

/**
 * Units of a key rotated since they were leased go back to the counter the rotation moved to its
 * successor (a key's or the default's limit; a user's counter never moves). Read without a lock:
 * units whose counter moves meanwhile find none and are dropped (a bounded loss, never an
 * admission).
 */
export async function toReturnSubjects(
  tx: postgres.TransactionSql,
  units: readonly LimitReturn[],
): Promise<LimitReturn[]> {
  const limitIds = [...new Set(units.map((u) => u.limitId))];
  const ofUsers = new Set(
    (await tx<Row[]>`SELECT id FROM limits WHERE scope = 'user'
      AND id = ANY(${toIdArray(limitIds)}::bigint[])`)
      .map((row) => Number(row.id)),
  );
  const keyUnits = units.filter((u) => !ofUsers.has(u.limitId));
  if (keyUnits.length === 0) return [...units];
  const ends = await toLimitKeys(tx, keyUnits.map((u) => u.subjectId), false);
  return units.map((u) =>
    ofUsers.has(u.limitId) ? u : { ...u, subjectId: ends.get(u.subjectId) ?? u.subjectId }
  );
}
