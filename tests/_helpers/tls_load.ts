/**
 * For certificate reload tests: which certificate a new connection gets, and
 * a keep-alive load as strict as `wrk` (a request whose connection closes
 * before its answer is a failure; `Connection: close` after an answer is a
 * clean reconnect), written over raw TLS so that no client retries hide a
 * lost request.
 */
import { generateSelfSigned } from "../../src/platform/tls.ts";

/** A certificate and key, with the file contents a test writes. */
export interface Pair {
  cert: string;
  key: string;
}

/** `count` distinct self-signed pairs for 127.0.0.1, the n-th valid 30 + n days. */
export function makePairs(count: number): Promise<Pair[]> {
  return Promise.all(Array.from({ length: count }, (_, i) => generateSelfSigned(30 + i)));
}

/**
 * Index in `pairs` of the certificate a new connection to `port` gets: each certificate is a
 * key of its own, so a handshake that trusts only it succeeds only when it is served.
 */
export async function servedPair(port: number, pairs: Pair[]): Promise<number | undefined> {
  for (const [index, pair] of pairs.entries()) {
    try {
      const conn = await Deno.connectTls({ hostname: "127.0.0.1", port, caCerts: [pair.cert] });
      try {
        await conn.handshake();
        return index;
      } finally {
        conn.close();
      }
    } catch {
      // Not this one.
    }
  }
  return undefined;
}

/** What a keep-alive load saw. */
export interface LoadResult {
  /** Answers read in full. */
  ok: number;
  /** Requests sent whose connection closed or failed before the answer. */
  failed: number;
  /** Connections that could not be opened (TCP or TLS handshake). */
  failedHandshakes: number;
  /** Clean reconnects after `Connection: close`. */
  reconnects: number;
  errors: string[];
}

/**
 * Keeps `connections` keep-alive connections busy with `GET path` until stopped; trusts every
 * certificate in `pairs`.
 */
export function startKeepAliveLoad(
  port: number,
  pairs: Pair[],
  options: { connections: number; path: string },
): { stop(): Promise<LoadResult> } {
  const result: LoadResult = { ok: 0, failed: 0, failedHandshakes: 0, reconnects: 0, errors: [] };
  let running = true;
  const request = new TextEncoder().encode(
    `GET ${options.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
  );
  const caCerts = pairs.map((pair) => pair.cert);

  async function loop(): Promise<void> {
    while (running) {
      let conn: Deno.TlsConn;
      try {
        conn = await Deno.connectTls({ hostname: "127.0.0.1", port, caCerts });
        await conn.handshake();
      } catch (error) {
        result.failedHandshakes++;
        result.errors.push(`connect: ${(error as Error).message}`);
        continue;
      }
      try {
        while (running) {
          await conn.write(request);
          const answer = await readResponse(conn);
          if (answer === undefined) {
            result.failed++;
            result.errors.push("connection closed before the answer");
            break;
          }
          result.ok++;
          if (answer.close) {
            result.reconnects++;
            break;
          }
        }
      } catch (error) {
        result.failed++;
        result.errors.push(`request: ${(error as Error).message}`);
      } finally {
        try {
          conn.close();
        } catch {
          // Already closed.
        }
      }
    }
  }

  const loops = Array.from({ length: options.connections }, loop);
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return result;
    },
  };
}

/** Reads one HTTP/1.1 response with a Content-Length body; undefined at end of stream. */
async function readResponse(conn: Deno.Conn): Promise<{ close: boolean } | undefined> {
  const buffer = new Uint8Array(16384);
  let text = "";
  while (true) {
    const end = text.indexOf("\r\n\r\n");
    if (end >= 0) {
      const head = text.slice(0, end).toLowerCase();
      const length = Number(/\r\ncontent-length: *(\d+)/.exec(head)?.[1] ?? 0);
      if (text.length - end - 4 >= length) {
        return { close: /\r\nconnection: *close/.test(head) };
      }
    }
    const read = await conn.read(buffer);
    if (read === null) return undefined;
    text += new TextDecoder().decode(buffer.subarray(0, read));
  }
}
