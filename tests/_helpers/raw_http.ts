/**
 * Requests written byte for byte: what `fetch` and `new Request()` cannot
 * send (a malformed Host, an absolute-form target, `\`, `;` or dot segments
 * that a URL parser would normalise away), against a handler served over real
 * TLS (or plain TCP), as a client on the internet would send them; and a
 * backend that records what reaches it.
 */
import type { Handler } from "../../src/http/app.ts";
import { testCertificate } from "./tls_server.ts";

/** A real backend that records every request it receives. */
export function startRecordingBackend() {
  const seen: { path: string; headers: Headers }[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    seen.push({ path: request.url.replace(/^http:\/\/[^/]*/, ""), headers: request.headers });
    return new Response("backend");
  });
  return {
    seen,
    url: new URL(`http://127.0.0.1:${server.addr.port}`),
    close: () => server.shutdown(),
  };
}

/** A response as read from the wire, its body decoded. */
export interface RawResponse {
  status: number;
  headers: Headers;
  body: string;
}

export interface RawServer {
  port: number;
  /** Sends `head` (request line and headers, `\r\n`-separated, without the final blank line). */
  send(head: string, body?: string): Promise<RawResponse>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Serves `handler` on 127.0.0.1 and a free port, over TLS unless `tls` is false. */
export async function startRawServer(handler: Handler, tls = true): Promise<RawServer> {
  const { cert, key } = await testCertificate();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {}, ...(tls ? { cert, key } : {}) },
    handler,
  );
  const port = server.addr.port;
  const close = () => server.shutdown();
  return {
    port,
    async send(head, body = "") {
      const conn = tls
        ? await Deno.connectTls({ hostname: "127.0.0.1", port, caCerts: [cert] })
        : await Deno.connect({ hostname: "127.0.0.1", port });
      const length = body === ""
        ? ""
        : `\r\nContent-Length: ${new TextEncoder().encode(body).length}`;
      const bytes = new TextEncoder().encode(
        `${head}${length}\r\nConnection: close\r\n\r\n${body}`,
      );
      // write() may take only part of a large buffer; a server that stops reading ends it.
      for (let sent = 0; sent < bytes.length;) {
        const n = await conn.write(bytes.subarray(sent)).catch(() => null);
        if (n === null) break;
        sent += n;
      }
      const chunks: Uint8Array[] = [];
      const buffer = new Uint8Array(16384);
      while (true) {
        const n = await conn.read(buffer).catch(() => null);
        if (n === null) break;
        chunks.push(buffer.slice(0, n));
      }
      conn.close();
      return parseResponse(new TextDecoder().decode(concat(chunks)));
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

function parseResponse(text: string): RawResponse {
  const end = text.indexOf("\r\n\r\n");
  if (end === -1) throw new Error(`no complete response: ${JSON.stringify(text.slice(0, 200))}`);
  const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers.append(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  let body = text.slice(end + 4);
  if (headers.get("transfer-encoding")?.includes("chunked")) body = unchunk(body);
  return { status: Number(statusLine.split(" ")[1]), headers, body };
}

function unchunk(text: string): string {
  let out = "";
  let rest = text;
  while (true) {
    const lineEnd = rest.indexOf("\r\n");
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (!(size > 0)) return out;
    out += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
}
