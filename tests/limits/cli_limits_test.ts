/**
 * `deno task admin limit …` as the process an operator runs, on the backend under test: the
 * commands of docs/configuration.md's "Rates and quotas", in order, then the stored limits and
 * their audit entries; mistakes are one line and exit 2.
 *
 * @module
 */
import assert from "node:assert/strict";
import { runAdminProcess } from "../_helpers/admin_cli.ts";
import { TEST_STORE_NAME } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { sharedPostgres } from "../_helpers/postgres_cluster.ts";
import { openStore } from "../../src/store/open_store.ts";

/** The commands of the section's `sh` block, without `deno task admin`. */
async function documentedCommands(): Promise<string[][]> {
  const markdown = await Deno.readTextFile(new URL("../../docs/configuration.md", import.meta.url));
  const section = markdown.slice(markdown.indexOf("\n## Rates and quotas"));
  const block = /^```sh tested-by: tests\/limits\/cli_limits_test\.ts\n([\s\S]*?)^```$/m.exec(
    section,
  )![1];
  return block.trim().split("\n").map((line) => {
    assert.match(line, /^deno task admin limit /);
    return line.replace(/^deno task admin /, "").split(" ");
  });
}

/** A store location of the backend under test: a SQLite file, or a new PostgreSQL database. */
async function newLocation(): Promise<{ where: string; cleanup(): void }> {
  if (TEST_STORE_NAME === "postgres") {
    return { where: await (await sharedPostgres()).createDatabase("limits_cli"), cleanup() {} };
  }
  const db = tempDbPath();
  return { where: db.path, cleanup: () => db.cleanup() };
}

/** User alice@example.org with `keys` keys (ids 1 to `keys`), through the CLI as processes. */
async function addAlice(where: string, keys: number): Promise<void> {
  const added = await runAdminProcess(where, ["user", "add", "alice@example.org"], "pw 123456");
  assert.equal(added.code, 0, added.err);
  for (let i = 0; i < keys; i++) {
    const key = await runAdminProcess(where, ["key", "create", "alice@example.org"]);
    assert.equal(key.code, 0, key.err);
  }
}

Deno.test({
  name:
    "[cli] the limit commands of docs/configuration.md work as processes, audited as the OS user",
  sanitizeResources: false,
  async fn() {
    const { where, cleanup } = await newLocation();
    try {
      await addAlice(where, 3);
      const outputs: string[] = [];
      for (const args of await documentedCommands()) {
        const run = await runAdminProcess(where, args);
        assert.equal(run.code, 0, `${args.join(" ")}: ${run.err}`);
        outputs.push(run.out);
      }
      assert.match(outputs[0], /^Set the rate of API key 3 to 10\/second \(limit \d+\)/);
      assert.match(outputs[2], /^Set the quota of user alice@example\.org to 100000\/month/);
      assert.match(outputs[4], /key 3 +rate +5000\/day/);
      assert.match(outputs[4], /user alice@example\.org +quota +100000\/month/);
      assert.match(outputs[5], /key +rate +10\/second +0 +10 /);
      assert.match(outputs[5], /user +quota +100000\/month +0 +100000 /);
      assert.match(outputs[6], /^Removed the rate 10\/second of API key 3/);

      const { store } = await openStore(where);
      try {
        const limits = await store.listLimits();
        assert.deepEqual(
          limits.map((l) => `${l.scope}:${l.subjectId}:${l.kind}:${l.max}/${l.period}`),
          [
            "default:null:rate:100/minute",
            "key:3:rate:5000/day",
            "user:1:quota:100000/month",
          ],
        );
        const audit = (await store.listAudit()).filter((row) => row.action.startsWith("limit."));
        assert.deepEqual(audit.map((row) => [row.actor, row.action, row.subject]), [
          ["cli:ops", "limit.set", "api_key:3"],
          ["cli:ops", "limit.set", "api_key:3"],
          ["cli:ops", "limit.set", "user:alice@example.org"],
          ["cli:ops", "limit.set", "limits:default"],
          ["cli:ops", "limit.removed", "api_key:3"],
        ]);
      } finally {
        await store.closeStore();
      }

      for (
        const [args, message] of [
          [
            ["limit", "set", "3", "--rate", "10/fortnight"],
            /^keygate admin: Invalid rate "10\/fortnight"/,
          ],
          [["limit", "set", "3"], /^keygate admin: Give exactly one of --rate/],
          [["limit", "set", "3", "--quota", "-5"], /^keygate admin: Invalid quota "-5"/],
          [["limit", "remove", "3", "week"], /^keygate admin: Invalid WHICH "week"/],
          [["limit", "usage", "default"], /^keygate admin: Invalid TARGET "default"/],
        ] as const
      ) {
        const run = await runAdminProcess(where, [...args]);
        assert.equal(run.code, 2, `${args.join(" ")}: ${run.err}`);
        assert.match(run.err.trim(), message);
        assert.equal(run.err.trim().split("\n").length, 1);
      }
      const missing = await runAdminProcess(where, ["limit", "remove", "3", "second"]);
      assert.equal(missing.code, 1);
      assert.equal(missing.err.trim(), "keygate admin: No second rate limit on api_key:3");
    } finally {
      cleanup();
    }
  },
});

Deno.test({
  name:
    "[cli] key rotate moves the key's limits to its successor; the old key's cannot be set, as processes",
  sanitizeResources: false,
  async fn() {
    const { where, cleanup } = await newLocation();
    try {
      await addAlice(where, 1);
      for (
        const args of [["limit", "set", "1", "--rate", "5000/day"], [
          "limit",
          "set",
          "1",
          "--quota",
          "700/month",
        ]]
      ) {
        const set = await runAdminProcess(where, args);
        assert.equal(set.code, 0, set.err);
      }
      const rotated = await runAdminProcess(where, ["key", "rotate", "1", "--grace", "1h"]);
      assert.equal(rotated.code, 0, rotated.err);
      assert.match(rotated.out, /^Rotated API key 1 to 2;/);
      // Both keys report the successor's limits: the old key counts against them until it ends.
      for (const key of ["2", "1"]) {
        const usage = await runAdminProcess(where, ["limit", "usage", key]);
        assert.equal(usage.code, 0, usage.err);
        assert.match(usage.out, /key +rate +5000\/day +0 +5000 /);
        assert.match(usage.out, /key +quota +700\/month +0 +700 /);
        // The old key's rows are its successor's limits, and standard error says so.
        assert.equal(
          usage.err.trim(),
          key === "1"
            ? "Note: API key 1 was rotated; these are its successor's limits (key 2), which it " +
              "counts against until it ends"
            : "",
        );
      }
      const refused = await runAdminProcess(where, ["limit", "set", "1", "--rate", "1/second"]);
      assert.equal(refused.code, 1);
      assert.equal(
        refused.err.trim(),
        "keygate admin: Cannot set the limit: API key 1 was rotated; its limits are its " +
          "successor's (key 2): set them there",
      );
      // The rotated key's list is its successor's limits, under the successor.
      const listed = await runAdminProcess(where, ["limit", "list", "1", "--json"]);
      assert.equal(listed.code, 0, listed.err);
      assert.deepEqual(
        JSON.parse(listed.out).map((row: { applies_to: string; limit: string }) =>
          `${row.applies_to}:${row.limit}`
        ).sort(),
        ["key 2:5000/day", "key 2:700/month"],
      );
      assert.match(listed.err, /^Note: API key 1 was rotated; these are its successor's limits/);
      const removal = await runAdminProcess(where, ["limit", "remove", "1", "day"]);
      assert.equal(removal.code, 1);
      assert.equal(
        removal.err.trim(),
        "keygate admin: No day rate limit on api_key:1: it was rotated, and its limits are its " +
          "successor's (key 2)",
      );
      const { store } = await openStore(where);
      try {
        assert.deepEqual(
          (await store.listLimits({ scope: "key" })).map((l) =>
            `${l.subjectId}:${l.kind}:${l.max}/${l.period}`
          ),
          ["2:quota:700/month", "2:rate:5000/day"],
        );
      } finally {
        await store.closeStore();
      }
    } finally {
      cleanup();
    }
  },
});
