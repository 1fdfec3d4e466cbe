/**
 * On PostgreSQL a batch of `deleteEndedTokens` that meets another deleter (a user's deletion,
 * `token purge`, a second janitor) waits for it and then skips the rows it took: the batch found
 * rows and deleted none. It must look again rather than answer 0 while ended rows are left, since
 * 0 ends a sweep, and the janitor's timed sweeps after it look only at keys and users that ended
 * since (src/auth/janitor.ts). SQLite's batch is one write transaction and cannot meet another.
 */
import assert from "node:assert/strict";
import { ENDED_TOKEN_IDS } from "../../../src/store/postgres/rows.ts";
import { EVER } from "../../../src/store/rows.ts";
import { testOnPostgres } from "../../_helpers/postgres_raw.ts";
import { issue, seed, T0 } from "../_contract_fixtures.ts";

testOnPostgres(
  "[postgres] a janitor batch whose rows another deleter took meanwhile looks again, and answers what it deleted",
  async (sql, db) => {
    const { store } = db;
    const { user, key } = await seed(store);
    // t1 (the seed's) and two more, all expired by the cutoff.
    for (const [name, expiresAt] of [["t2", T0 + 2], ["t3", T0 + 3]] as const) {
      await issue(store, { userId: user.id, apiKeyId: key.id }, name, {
        issuedAt: T0,
        expiresAt,
      });
    }
    await sql`UPDATE tokens SET expires_at = ${T0 + 1} WHERE expires_at > ${T0 + 3}`;
    assert.equal(await store.countRows("tokens"), 3);
    let batch: Promise<number> | undefined;
    await sql.begin(async (tx) => {
      // Another deleter takes the two a batch of 2 finds, and holds them until it commits.
      const taken = (await tx.unsafe(`SELECT id FROM (${ENDED_TOKEN_IDS}) AS ended`, [
        T0 + 10,
        2,
        EVER,
      ])).map((row) => Number(row.id));
      assert.equal(new Set(taken).size, 2);
      await tx`DELETE FROM tokens WHERE id IN ${tx(taken)}`;
      batch = store.deleteEndedTokens({ size: 2, cutoff: T0 + 10 });
      // The batch waits for those rows' locks before this commits.
      for (let waited = 0;; waited += 10) {
        // (Its query shows as its pipelined `begin`: the wait is what identifies it.)
        const [row] = await tx.unsafe(`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock'`);
        if (row.n > 0) break;
        assert.ok(waited < 5000, "the batch never waited for the other deleter");
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    });
    // Its rows gone, the batch looked again and deleted the third.
    assert.equal(await batch, 1);
    assert.equal(await store.countRows("tokens"), 0);
  },
);
