/**
 * Reading request bodies with a size cap and a deadline, since `Deno.serve`
 * has neither.
 *
 * @module
 */
import { HttpError } from "./errors.ts";
import { findRequestFormat } from "./negotiate.ts";
import type { Format } from "../formats/format.ts";
import { withDeadline } from "../platform/deadlines.ts";

/** Bodies larger than this are refused with 413; a token request needs a few hundred bytes. */
export const MAX_BODY_BYTES = 16 * 1024;
/** A body that has not fully arrived after this long is refused with 408. */
export const BODY_TIMEOUT_MS = 10_000;

/** Options for {@link readBody}. */
export interface ReadBodyOptions {
  maxBytes?: number;
  timeoutMs?: number;
}

/**
 * Reads the whole body as strict UTF-8 text (a leading BOM is dropped).
 *
 * With a `Content-Length` within the cap, the body is taken whole (the HTTP
 * layer stops at the declared length, and Deno hands over a body that has
 * already arrived without a stream); otherwise it is read chunk by chunk
 * and refused as soon as it passes the cap.
 *
 * @throws {HttpError} 413 when `Content-Length` or the bytes received exceed
 * the cap, 408 when the body does not arrive in time, 400 when it is not
 * valid UTF-8 or the connection breaks mid-body.
 */
export async function readBody(request: Request, options: ReadBodyOptions = {}): Promise<string> {
  const maxBytes = options.maxBytes ?? MAX_BODY_BYTES;
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  const timeoutMs = options.timeoutMs ?? BODY_TIMEOUT_MS;
  let bytes: Uint8Array;
  if (declared !== null) {
    try {
      bytes = await withDeadline(request.bytes(), timeoutMs, timedOut);
    } catch (error) {
      throw error instanceof HttpError ? error : broken(error);
    }
    // Belt and braces: a Request built in process is not framed by its Content-Length.
    if (bytes.byteLength > maxBytes) throw tooLarge(maxBytes);
  } else {
    if (request.body === null) return "";
    bytes = await readCapped(request.body, maxBytes, timeoutMs);
  }
  return decodeUtf8(bytes);
}

/** How long {@link drainBody} waits for the rest of a body nobody read. */
export const DRAIN_TIMEOUT_MS = 1_000;

/**
 * Reads and discards what is left of a request body that the answer did not
 * need (a 401 or 403 before the body was read), up to `maxBytes` and for at
 * most {@link DRAIN_TIMEOUT_MS}; a longer or slower body is cancelled.
 *
 * Over HTTP/2, `Deno.serve` ends a stream whose request body is still
 * arriving when the answer is sent with a stream reset, and clients (curl)
 * then report a framing error instead of the answer: reading the body first
 * lets the answer arrive after the request has ended. Never throws.
 */
export async function drainBody(request: Request, maxBytes = MAX_BODY_BYTES): Promise<void> {
  const body = request.body;
  if (body === null || request.bodyUsed || body.locked) return;
  const reader = body.getReader();
  const declared = Number(request.headers.get("content-length") ?? "0");
  let size = 0;
  const drain = async () => {
    if (declared > maxBytes) return;
    while (size <= maxBytes) {
      const result = await reader.read();
      if (result.done) return;
      size += result.value.byteLength;
    }
  };
  try {
    await withDeadline(drain(), DRAIN_TIMEOUT_MS, () => new Error("body not drained in time"));
  } catch {
    // A broken or slow body: cancelled below.
  }
  reader.cancel().catch(() => {});
}

/** Reads `body` chunk by chunk, refusing it once it passes `maxBytes`. */
async function readCapped(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  timeoutMs: number,
): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const read = async () => {
    while (true) {
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        result = await reader.read();
      } catch (error) {
        throw broken(error);
      }
      if (result.done) return;
      size += result.value.byteLength;
      if (size > maxBytes) throw tooLarge(maxBytes);
      chunks.push(result.value);
    }
  };
  try {
    await withDeadline(read(), timeoutMs, timedOut);
  } catch (error) {
    reader.cancel().catch(() => {});
    throw error;
  }
  return concat(chunks, size);
}

function timedOut(): HttpError {
  return new HttpError(408, "request_timeout", "Request body did not arrive in time");
}

function broken(error: unknown): HttpError {
  return new HttpError(400, "invalid_request", "Cannot read request body: connection broken", {
    cause: error,
  });
}

function tooLarge(maxBytes: number): HttpError {
  return new HttpError(
    413,
    "request_too_large",
    `Request body too large: the limit is ${maxBytes} bytes`,
  );
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

const decoder = new TextDecoder("utf-8", { fatal: true });

function isAscii(bytes: Uint8Array): boolean {
  for (let i = 0; i < bytes.length; i++) if (bytes[i] > 0x7f) return false;
  return true;
}

/** Bodies up to this size that are plain ASCII are made a string without the decoder. */
const ASCII_FAST_MAX = 1024;

function decodeUtf8(bytes: Uint8Array): string {
  // The usual token request (a few dozen ASCII bytes): the decoder is a call into the runtime.
  if (bytes.length <= ASCII_FAST_MAX && isAscii(bytes)) {
    return String.fromCharCode.apply(null, bytes as unknown as number[]);
  }
  try {
    return decoder.decode(bytes);
  } catch {
    throw new HttpError(400, "invalid_request", "Cannot read request body: not valid UTF-8");
  }
}

/**
 * Reads the body and parses it with `parse` in the format its `Content-Type`
 * (or, without one, its first character) declares.
 *
 * @throws {HttpError} as {@link readBody}; 415 for an unsupported type; 400
 * for an empty body or one that `parse` rejects with a `SyntaxError`.
 */
export async function readDocument<T>(
  request: Request,
  parse: (text: string, format: Format) => T,
  options: ReadBodyOptions = {},
): Promise<T> {
  const text = await readBody(request, options);
  if (text.trim() === "") {
    throw new HttpError(400, "invalid_request", "Missing request body");
  }
  const format = findRequestFormat(request.headers.get("content-type"), text);
  try {
    return parse(text, format);
  } catch (error) {
    if (error instanceof SyntaxError) {
      throw new HttpError(400, "invalid_request", `Cannot parse request body: ${error.message}`);
    }
    throw error;
  }
}
