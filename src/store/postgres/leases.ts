/**
 * Leases: a named duty (the janitor) that one instance at a time performs.
 * A lease is a row; an instance takes it when it is free, expired or
 * already its own, in one statement, so two instances never both hold it.
 *
 * @module
 */
import type { PgContext } from "./db.ts";

/** Takes or renews lease `name` for `holder` until `now + ttlMs`; resolves to whether it holds it. */
export function claimLease(
  db: PgContext,
  lease: { name: string; holder: string; now: number; ttlMs: number },
): Promise<boolean> {
  const until = lease.now + lease.ttlMs;
  return db.write(async (tx) => {
    const rows = await tx`INSERT INTO leases (name, holder, expires_at)
      VALUES (${lease.name}, ${lease.holder}, ${until})
      ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
      WHERE leases.holder = excluded.holder OR leases.expires_at <= ${lease.now}
      RETURNING holder`;
    return rows.length === 1;
  }, { ends: () => [], relaxed: () => true });
}

/** Gives lease `name` up if `holder` holds it (at shutdown), so another instance takes over at once. */
export async function releaseLease(
  db: PgContext,
  lease: { name: string; holder: string },
): Promise<void> {
  await db.write(async (tx) => {
    await tx`DELETE FROM leases WHERE name = ${lease.name} AND holder = ${lease.holder}`;
  }, { ends: () => [] });
}
