import assert from "node:assert/strict";
import { listTcpSockets, setListenerNoDelay } from "../../src/platform/nodelay.ts";
import { testCertificate } from "../_helpers/tls_server.ts";

const linuxOnly = { ignore: Deno.build.os !== "linux" };

/**
 * Serves one keep-alive request over TLS and returns the server's sockets
 * while the connection is open. (Deno's plain-HTTP listener sets TCP_NODELAY
 * itself; its TLS listener does not.)
 */
async function socketsAfterOneRequest(noDelay: boolean) {
  const { cert, key } = await testCertificate();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert, key, onListen() {} },
    () => new Response("ok"),
  );
  const { port } = server.addr;
  try {
    const listenersSet = noDelay ? setListenerNoDelay(port) : 0;
    const client = Deno.createHttpClient({ caCerts: [cert] });
    try {
      const response = await fetch(`https://127.0.0.1:${port}/`, { client });
      assert.equal(await response.text(), "ok");
      return { listenersSet, sockets: listTcpSockets(port) }; // the connection is still pooled
    } finally {
      client.close();
    }
  } finally {
    await server.shutdown();
  }
}

Deno.test(
  "setListenerNoDelay() turns Nagle off for every connection the listener accepts",
  linuxOnly,
  async () => {
    const { listenersSet, sockets } = await socketsAfterOneRequest(true);
    assert.equal(listenersSet, 1);
    const listener = sockets.filter((s) => s.listening);
    const accepted = sockets.filter((s) => !s.listening);
    assert.equal(listener.length, 1);
    assert.equal(listener[0].noDelay, true);
    assert.ok(accepted.length >= 1, "the client's connection was accepted");
    assert.ok(accepted.every((s) => s.noDelay), "accepted connections inherit TCP_NODELAY");
  },
);

Deno.test(
  "without setListenerNoDelay(), Deno.serve's TLS listener leaves Nagle on",
  linuxOnly,
  async () => {
    const { sockets } = await socketsAfterOneRequest(false);
    const accepted = sockets.filter((s) => !s.listening);
    assert.ok(accepted.length >= 1);
    assert.ok(
      accepted.every((s) => !s.noDelay),
      "if this fails, Deno now sets it: drop src/platform/nodelay.ts",
    );
  },
);

Deno.test(
  "setListenerNoDelay() changes nothing on a port nobody here listens on",
  linuxOnly,
  () => {
    assert.equal(setListenerNoDelay(1), 0);
    assert.deepEqual(listTcpSockets(1), []);
  },
);
