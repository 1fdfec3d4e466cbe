import assert from "node:assert/strict";
import type { Duplex } from "node:stream";
import { StoreUnavailable } from "../../src/store/errors.ts";
import { reconnectDelaySeconds } from "../../src/store/postgres/connect.ts";
import { classifyPostgresError } from "../../src/store/postgres/errors.ts";
import {
  type AskServer,
  createPrimarySocket,
  findServer,
  isWanted,
  NO_PRIMARY,
} from "../../src/store/postgres/primary_socket.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";

const PRIMARY = { inRecovery: false, readOnly: false };
const STANDBY = { inRecovery: true, readOnly: true };
const READ_ONLY_PRIMARY = { inRecovery: false, readOnly: true };
const SERVERS = [{ host: "a", port: 1 }, { host: "b", port: 2 }, { host: "c", port: 3 }];

Deno.test("isWanted() takes no standby, and for read-write no read-only primary", () => {
  assert.equal(isWanted(PRIMARY, "read-write"), true);
  assert.equal(isWanted(PRIMARY, "primary"), true);
  assert.equal(isWanted(STANDBY, "read-write"), false);
  assert.equal(isWanted(STANDBY, "primary"), false);
  // A PostgreSQL 14+ standby reports default_transaction_read_only off: still no.
  assert.equal(isWanted({ inRecovery: true, readOnly: false }, "read-write"), false);
  assert.equal(isWanted(READ_ONLY_PRIMARY, "read-write"), false);
  assert.equal(isWanted(READ_ONLY_PRIMARY, "primary"), true);
});

Deno.test("findServer() answers the first server that qualifies, without waiting for a slow one", async () => {
  // A host that does not answer (until the end of the test): its timeout must not delay the choice.
  const silent = Promise.withResolvers<never>();
  const ask: AskServer = (server) => {
    if (server.host === "a") return silent.promise;
    return Promise.resolve(server.host === "b" ? STANDBY : PRIMARY);
  };
  assert.equal(await findServer(SERVERS, "read-write", ask), 2);
  silent.reject(new Error("timeout"));
});

Deno.test("findServer() answers undefined when no server qualifies (a failover under way)", async () => {
  const ask: AskServer = (server) =>
    server.host === "b" ? Promise.resolve(STANDBY) : Promise.reject(new Error("refused"));
  assert.equal(await findServer(SERVERS, "primary", ask), undefined);
  assert.equal(await findServer([], "primary", ask), undefined);
});

Deno.test("createPrimarySocket() connects to the server found, and asks again once it refuses", async () => {
  using first = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  using second = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const portOf = (listener: Deno.Listener) => (listener.addr as Deno.NetAddr).port;
  const location = parseStoreUrl(
    `postgres://kg@127.0.0.1:${portOf(first)},127.0.0.1:${portOf(second)}/auth`,
  ) as PostgresLocation;
  let primaryPort = portOf(second);
  const asked: number[] = [];
  const ask: AskServer = (server) => {
    asked.push(server.port);
    return Promise.resolve(server.port === primaryPort ? PRIMARY : STANDBY);
  };
  const open = createPrimarySocket(location, {
    timeoutSeconds: 1,
    ssl: false,
    applicationName: "t",
    ask,
  });
  const socket = await open() as import("node:net").Socket;
  const accepted = await second.accept();
  await new Promise((resolve) => socket.once("connect", resolve));
  assert.equal((accepted.remoteAddr as Deno.NetAddr).port, socket.localPort);
  assert.deepEqual(asked.sort(), [portOf(first), portOf(second)].sort());
  // A second connection within a second reuses the answer.
  const again = await open() as import("node:net").Socket;
  (await second.accept()).close();
  assert.equal(asked.length, 2);
  // The primary goes away: connecting fails, and the next connection asks again.
  second.close();
  primaryPort = portOf(first);
  const refused = await open() as import("node:net").Socket;
  await new Promise((resolve) => refused.once("error", resolve));
  const moved = await open() as import("node:net").Socket;
  (await first.accept()).close();
  assert.equal(asked.length, 4);
  for (const each of [socket, again, refused, moved]) each.destroy();
  accepted.close();
});

Deno.test("createPrimarySocket() without a primary gives a stream whose first write fails as unavailable", async () => {
  const location = parseStoreUrl("postgres://kg@127.0.0.1:1,127.0.0.1:2/auth") as PostgresLocation;
  const open = createPrimarySocket(location, {
    timeoutSeconds: 1,
    ssl: false,
    applicationName: "t",
    ask: () => Promise.resolve(STANDBY),
  });
  const stream = await open() as Duplex;
  const failed = new Promise<Error>((resolve) => stream.once("error", resolve));
  stream.write(new Uint8Array([0]));
  const error = await failed;
  assert.equal((error as Error & { code: string }).code, NO_PRIMARY);
  const classified = classifyPostgresError(error);
  assert.ok(classified instanceof StoreUnavailable);
  assert.equal(classified.message, "Database unreachable");
});

Deno.test("reconnectDelaySeconds() stays at most a quarter of a second, however long the outage", () => {
  assert.ok(reconnectDelaySeconds(0) <= 0.25);
  assert.ok(reconnectDelaySeconds(1) > reconnectDelaySeconds(0));
  for (const failures of [5, 10, 100, 10_000]) assert.equal(reconnectDelaySeconds(failures), 0.25);
});
