/**
 * One server per address and port, also with `--workers` (issue 29): the
 * request workers share their port through SO_REUSEPORT, which must not let a
 * second keygate (or any other program) in beside them. Real `deno task start`
 * processes on a fixed port; the refusal reads as the one without --workers.
 */
import assert from "node:assert/strict";
import { claimPort, lockName } from "../../../src/server/port_guard.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import {
  addUserWithKey,
  type ServerProcess,
  startServerProcess,
} from "../../_helpers/server_process.ts";
import { runTask } from "../../_helpers/task.ts";
import { findFreePort } from "../../_helpers/free_port.ts";

const PASSWORD = "port guard pw";

/** The line `keygate` prints for a port in use, with or without --workers. */
function inUse(port: number): string {
  return `keygate: Cannot listen on 127.0.0.1:${port} (--port ${port}): the address is already ` +
    "in use; stop the other process or choose another --port\n";
}

/** `deno task start` on 127.0.0.1:port, behind a proxy (plain HTTP), until it exits. */
function startRefused(port: number, db: string, extra: string[] = []) {
  return runTask("start", [
    "--port",
    String(port),
    "--hostname",
    "127.0.0.1",
    "--db",
    db,
    "--behind-proxy",
    ...extra,
  ]);
}

/** `deno task start --workers 2` on 127.0.0.1:port, waiting until it listens. */
function startServing(port: number, db: string): Promise<ServerProcess> {
  return startServerProcess(db, ["--port", String(port), "--workers", "2", "--behind-proxy"], {
    task: true,
    ownPort: true,
  });
}

async function login(origin: string, apiKey: string): Promise<number> {
  const response = await fetch(`${origin}/api/userservice/tokens`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json",
      "x-forwarded-proto": "https",
      // A connection of its own: the kernel chooses a listener per connection.
      connection: "close",
    },
    body: JSON.stringify({
      auth_request: { user: { email: "ops@example.org", password: PASSWORD }, api_key: apiKey },
    }),
  });
  await response.body?.cancel();
  return response.status;
}

Deno.test({
  name:
    "[server] --workers 2 on a port another keygate --workers 2 serves: exit 1 with the port-in-use line; the first keeps every login",
  sanitizeResources: false, // the server's pipes close after its exit, at the end of the test
  async fn() {
    using first = tempDbPath();
    using second = tempDbPath();
    const apiKey = await addUserWithKey(first.path, "ops@example.org", PASSWORD);
    const port = findFreePort();
    const server = await startServing(port, first.path);
    try {
      // Another database, the same port: before, the kernel split the logins between them.
      const refused = await startRefused(port, second.path, ["--workers", "2"]);
      assert.equal(refused.code, 1);
      assert.equal(refused.err, inUse(port));
      const statuses = [];
      for (let i = 0; i < 12; i++) statuses.push(await login(server.origin, apiKey));
      assert.deepEqual(statuses, Array(12).fill(200));
      // Without --workers the kernel refuses the bind itself: the same line.
      const single = await startRefused(port, second.path);
      assert.equal(single.code, 1);
      assert.equal(single.err, inUse(port));
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
    // The address is free again once the first stopped: the lock went with it.
    const again = await startServing(port, second.path);
    assert.equal((await again.stop()).code, 0);
  },
});

Deno.test({
  name:
    "[server] --workers 2 on a port another program serves, with or without SO_REUSEPORT: exit 1, never os error 98",
  async fn() {
    using db = tempDbPath();
    for (const reusePort of [false, true]) {
      const port = findFreePort();
      const other = Deno.listen({ hostname: "127.0.0.1", port, reusePort });
      try {
        const refused = await startRefused(port, db.path, ["--workers", "2"]);
        assert.equal(refused.code, 1, `reusePort ${reusePort}`);
        assert.equal(refused.err, inUse(port));
        assert.doesNotMatch(refused.err, /os error/);
      } finally {
        other.close();
      }
    }
  },
});

Deno.test({
  name: "[server] two keygates --workers 2 started at once on one port: one serves, one exits 1",
  sanitizeResources: false,
  async fn() {
    using one = tempDbPath();
    using two = tempDbPath();
    const port = findFreePort();
    const started = await Promise.allSettled([
      startServing(port, one.path),
      startServing(port, two.path),
    ]);
    const up = started.filter((s) => s.status === "fulfilled");
    try {
      assert.equal(up.length, 1, "exactly one listens");
      const failed = started.find((s) => s.status === "rejected") as PromiseRejectedResult;
      assert.match(String(failed.reason), /the address is already in use/);
    } finally {
      for (const s of up) await (s as PromiseFulfilledResult<ServerProcess>).value.stop();
    }
  },
});

Deno.test("claimPort() takes a lock per address: a second claim is AddrInUse until the first is released", () => {
  const port = findFreePort();
  const claim = claimPort("127.0.0.1", port);
  try {
    assert.equal(claim.port, port);
    assert.throws(() => claimPort("127.0.0.1", port), Deno.errors.AddrInUse);
    // The probe leaves the port free for the workers' own SO_REUSEPORT sockets.
    const worker = Deno.listen({ hostname: "127.0.0.1", port, reusePort: true });
    worker.close();
  } finally {
    claim.release();
  }
  claimPort("127.0.0.1", port).release();
  // Port 0: the kernel's choice, locked under that number.
  const any = claimPort("127.0.0.1", 0);
  try {
    assert.notEqual(any.port, 0);
    if (Deno.build.os === "linux") {
      assert.throws(
        () => Deno.listen({ transport: "unix", path: lockName("127.0.0.1", any.port) }),
        Deno.errors.AddrInUse,
      );
    }
  } finally {
    any.release();
  }
});
