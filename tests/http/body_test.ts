import assert from "node:assert/strict";
import fc from "fast-check";
import { readBody, readDocument } from "../../src/http/body.ts";
import { HttpError } from "../../src/http/errors.ts";
import { createTestApp } from "../_helpers/test_app.ts";
import { testCertificate } from "../_helpers/tls_server.ts";
import { startRawServer } from "../_helpers/raw_http.ts";

const post = (body: BodyInit | null, headers: Record<string, string> = {}) =>
  new Request("https://k.test/", { method: "POST", body, headers });

function assertHttpError(status: number, code: string) {
  return (error: unknown) => {
    assert.ok(error instanceof HttpError, String(error));
    assert.equal(error.status, status);
    assert.equal(error.code, code);
    return true;
  };
}

Deno.test("readBody() reads UTF-8 and drops a BOM", async () => {
  assert.equal(await readBody(post("\ufeffhéllo")), "héllo");
});

Deno.test("readBody() refuses a declared Content-Length over the cap without reading", async () => {
  let pulled = false;
  const stream = new ReadableStream({ pull: () => void (pulled = true) }, { highWaterMark: 0 });
  const request = post(stream, { "content-length": "20000" });
  await assert.rejects(
    readBody(request, { maxBytes: 16384 }),
    assertHttpError(413, "request_too_large"),
  );
  assert.equal(pulled, false);
});

Deno.test("readBody() stops reading a streamed body once it passes the cap", async () => {
  let chunks = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      chunks++;
      controller.enqueue(new Uint8Array(4096));
    },
  });
  await assert.rejects(
    readBody(post(stream), { maxBytes: 16384 }),
    assertHttpError(413, "request_too_large"),
  );
  assert.ok(chunks <= 6, `read ${chunks} chunks`);
});

Deno.test("readBody() gives 408 for a body that stalls", async () => {
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode("{"));
    },
  });
  // The body deadline's shared timer does not keep a process alive on its own (a server's
  // listener does): this timer stands in for the listener.
  const alive = setTimeout(() => {}, 5000);
  try {
    await assert.rejects(
      readBody(post(stream), { timeoutMs: 50 }),
      assertHttpError(408, "request_timeout"),
    );
    const declared = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("{"));
      },
    });
    // With a Content-Length the body is taken whole, under the same deadline.
    const started = performance.now();
    await assert.rejects(
      readBody(post(declared, { "content-length": "10" }), { timeoutMs: 50 }),
      assertHttpError(408, "request_timeout"),
    );
    const waited = performance.now() - started;
    assert.ok(waited >= 45 && waited < 1000, `408 after ${waited} ms`);
  } finally {
    clearTimeout(alive);
  }
});

Deno.test("readBody() refuses a body longer than the cap despite a small Content-Length", async () => {
  // Deno.serve frames a body by its Content-Length; a Request built in process is not.
  await assert.rejects(
    readBody(post("x".repeat(20000), { "content-length": "10" }), { maxBytes: 16384 }),
    assertHttpError(413, "request_too_large"),
  );
  assert.equal(await readBody(post("hello", { "content-length": "5" })), "hello");
});

Deno.test("readBody() gives 400 for invalid UTF-8", async () => {
  await assert.rejects(
    readBody(post(new Uint8Array([0x7b, 0xff, 0x7d]))),
    assertHttpError(400, "invalid_request"),
  );
});

Deno.test("readDocument() gives 400 for an empty body and a parser's SyntaxError", async () => {
  const parse = () => {
    throw new SyntaxError("nope");
  };
  await assert.rejects(readDocument(post("  "), parse), assertHttpError(400, "invalid_request"));
  await assert.rejects(
    readDocument(post("{}", { "content-type": "application/json" }), parse),
    (error: HttpError) =>
      error.status === 400 && error.message === "Cannot parse request body: nope",
  );
});

Deno.test("[e2e] a body over the cap, still being sent, gets its 413 and no reset", async () => {
  // A proxy streams a body on to keygate while it arrives: the 413, given as soon as the
  // Content-Length says too much, must reach it whole, without a reset under its writes.
  await using app = await createTestApp();
  await using server = await startRawServer(app.handler);
  const { cert } = await testCertificate();
  const conn = await Deno.connectTls({ hostname: "127.0.0.1", port: server.port, caCerts: [cert] });
  const encoder = new TextEncoder();
  const size = 20_000;
  await conn.write(encoder.encode(
    "POST /api/userservice/tokens HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
      `Content-Type: application/json\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`,
  ));
  const failures: string[] = [];
  for (let sent = 0; sent < size; sent += 4000) {
    await new Promise((resolve) => setTimeout(resolve, 30));
    await conn.write(new Uint8Array(4000).fill(120)).catch((e) => failures.push(String(e)));
  }
  let text = "";
  const decoder = new TextDecoder();
  const buffer = new Uint8Array(16384);
  for (let n = await conn.read(buffer); n !== null; n = await conn.read(buffer)) {
    text += decoder.decode(buffer.subarray(0, n), { stream: true });
  }
  conn.close();
  assert.deepEqual(failures, [], "the server stopped reading while the body was still sent");
  assert.match(text, /^HTTP\/1\.1 413 /);
  assert.match(text, /request_too_large/);
});

Deno.test("readBody() decodes any bytes as the strict UTF-8 decoder does (ASCII fast path too)", async () => {
  const reference = new TextDecoder("utf-8", { fatal: true });
  const byteArrays = fc.oneof(
    fc.uint8Array({ maxLength: 1100, max: 0x7f }),
    fc.uint8Array({ minLength: 1020, maxLength: 1030, max: 0x7f }),
    fc.uint8Array({ maxLength: 64 }),
  );
  await fc.assert(
    fc.asyncProperty(byteArrays, async (bytes) => {
      let expected: string | undefined;
      try {
        expected = reference.decode(bytes);
      } catch {
        expected = undefined;
      }
      const request = post(bytes.slice(), { "content-length": String(bytes.length) });
      if (expected === undefined) {
        await assert.rejects(readBody(request), assertHttpError(400, "invalid_request"));
      } else {
        assert.equal(await readBody(request), expected);
      }
    }),
    { numRuns: 500 },
  );
});
