/**
 * The change follower over a real grant change log (the one both stores keep): each scope
 * learned once, in order; `all` when the log no longer covers the position seen or none was
 * seen; nothing while the position cannot be confirmed, and the changes made meanwhile after.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createChangeFollower } from "../../src/auth/change_follower.ts";
import { createGrantChangeLog } from "../../src/store/grant_change_log.ts";
import type { GrantScope } from "../../src/store/store.ts";

function setup(capacity = 8) {
  const log = createGrantChangeLog(capacity);
  let confirmed = true;
  const feed = {
    readGrantEpoch: () => confirmed ? log.position() : undefined,
    readGrantChanges: (since: number) => log.since(since),
  };
  const applied: GrantScope[] = [];
  return {
    log,
    feed,
    applied,
    confirm(value: boolean) {
      confirmed = value;
    },
  };
}

Deno.test("createChangeFollower() applies each scope learned since the last follow, once, in order", () => {
  const { log, feed, applied } = setup();
  log.push({ kind: "key", id: 1 }); // before the follower: not its business
  const follower = createChangeFollower(feed, (scope) => applied.push(scope));
  assert.equal(follower.follow(), 1);
  assert.deepEqual(applied, []);
  log.push({ kind: "key", id: 2 });
  log.push({ kind: "user", id: 7 });
  assert.equal(follower.follow(), 3);
  assert.deepEqual(applied, [{ kind: "key", id: 2 }, { kind: "user", id: 7 }]);
  assert.equal(follower.follow(), 3);
  assert.equal(applied.length, 2, "nothing twice");
});

Deno.test("createChangeFollower() applies all when the log no longer covers the position seen", () => {
  const { log, feed, applied } = setup(4);
  const follower = createChangeFollower(feed, (scope) => applied.push(scope));
  for (let id = 1; id <= 6; id++) log.push({ kind: "token", id });
  assert.equal(follower.follow(), 6);
  assert.deepEqual(applied, [{ kind: "all" }]);
});

Deno.test("createChangeFollower() applies nothing while the position is unconfirmed, and catches up after", () => {
  const { log, feed, applied, confirm } = setup();
  confirm(false);
  const follower = createChangeFollower(feed, (scope) => applied.push(scope));
  log.push({ kind: "key", id: 3 });
  assert.equal(follower.follow(), undefined);
  assert.deepEqual(applied, []);
  confirm(true);
  assert.equal(follower.follow(), 1);
  assert.deepEqual(applied, [{ kind: "all" }], "no position was ever seen: everything goes");
  confirm(false);
  log.push({ kind: "user", id: 4 });
  assert.equal(follower.follow(), undefined);
  confirm(true);
  follower.follow();
  assert.deepEqual(applied, [{ kind: "all" }, { kind: "user", id: 4 }]);
});
