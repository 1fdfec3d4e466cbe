/**
 * The benchmark's ceiling: a bare `Deno.serve` over HTTPS answering 3 bytes,
 * optionally on N listeners sharing one port with `reusePort`, in N threads
 * (Web Workers) or N processes, to compare the two ways of using more cores.
 *
 * With `--keygate-shape` first (and `--allow-ffi`), it answers every request
 * as keygate answers a secure GET instead: it reads the request fields
 * keygate reads (`Accept`, `Host`, `Authorization`, `X-Api-Key`, the URL),
 * and sends a `token_info` body of the same size with the same five headers,
 * on a listener with `TCP_NODELAY` like keygate's. Its cost is what any
 * handler pays on Deno for that exchange, before any work of its own. With
 * `--pad N` after it, each answer carries one more field of N bytes (the head
 * made longer: write_split.ts).
 *
 * Usage: deno run --allow-net --allow-read [--allow-run] [--allow-ffi] --unstable-net
 *          scripts/bench/bare_server.ts [--keygate-shape [--pad N]] CERT_FILE KEY_FILE
 *          [N [threads|processes]]
 * Prints `listening PORT` once every listener is ready.
 *
 * @module
 */
import { setListenerNoDelay } from "../../src/platform/nodelay.ts";

const BODY = new TextEncoder().encode("ok\n");

/** keygate's answer to a secure GET, as long as it is with the bench's e-mail addresses. */
const TOKEN_INFO = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><token_info>' +
  "<email>bench12345@example.org</email><expires_at>2026-11-24T04:10:31.396Z</expires_at>" +
  "<expires_in>86393</expires_in></token_info>";
let answered = 0;

/** Reads what keygate reads of a secure GET and answers with keygate's headers and body size. */
function answerAsKeygate(request: Request): Response {
  void request.headers.get("accept");
  void request.headers.get("host");
  void request.headers.get("authorization");
  void request.headers.get("x-api-key");
  void request.url;
  const response = new Response(TOKEN_INFO, {
    headers: { "content-type": "application/xml; charset=utf-8" },
  });
  const headers = response.headers;
  headers.set("strict-transport-security", "max-age=31536000; includeSubDomains");
  headers.set("x-content-type-options", "nosniff");
  headers.set("cache-control", "no-store");
  headers.set("x-request-id", `0badcafe-${(++answered).toString(36)}`);
  if (PAD !== "") headers.set("x-pad", PAD);
  return response;
}

const shaped = Deno.args[0] === "--keygate-shape";
const padded = shaped && Deno.args[1] === "--pad";
/** `--pad N`: the value of one more field, N bytes. */
const PAD = padded ? "p".repeat(Number(Deno.args[2])) : "";
const args = Deno.args.slice(padded ? 3 : shaped ? 1 : 0);

/** Serves on `port` (0: any) and resolves to the port bound. */
function serve(certFile: string, keyFile: string, port: number, reusePort: boolean) {
  return new Promise<number>((resolve) => {
    Deno.serve({
      hostname: "127.0.0.1",
      port,
      reusePort,
      cert: Deno.readTextFileSync(certFile),
      key: Deno.readTextFileSync(keyFile),
      onListen: ({ port }) => {
        if (shaped && setListenerNoDelay(port) === 0) {
          console.error("bare: cannot set TCP_NODELAY as keygate does (needs --allow-ffi, Linux)");
          Deno.exit(1);
        }
        resolve(port);
      },
    }, shaped ? answerAsKeygate : () => new Response(BODY));
  });
}

/** The processes started by {@link startCopy}: stopped with this one. */
const copies: Deno.ChildProcess[] = [];

/** Starts a copy of this script in a thread or a process on `port`; resolves once it listens. */
async function startCopy(
  mode: string,
  certFile: string,
  keyFile: string,
  port: number,
): Promise<void> {
  if (mode === "threads") {
    const worker = new Worker(import.meta.url, { type: "module" });
    await new Promise<void>((resolve) => {
      worker.onmessage = () => resolve();
      worker.postMessage({ certFile, keyFile, port });
    });
    return;
  }
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net",
      "--allow-read",
      "--unstable-net",
      new URL(import.meta.url).pathname,
      certFile,
      keyFile,
      "1",
      "copy",
      String(port),
    ],
    stdout: "piped",
  }).spawn();
  copies.push(child);
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  while (!(await reader.read()).value?.includes("ready")) { /* wait */ }
  reader.releaseLock();
}

if ("WorkerGlobalScope" in globalThis) {
  const scope = self as unknown as Worker;
  scope.onmessage = async (event: MessageEvent) => {
    const { certFile, keyFile, port } = event.data;
    await serve(certFile, keyFile, port, true);
    scope.postMessage("ready");
  };
} else if (import.meta.main) {
  const [certFile, keyFile, count = "1", mode = "threads", copyPort] = args;
  if (mode === "copy") {
    await serve(certFile, keyFile, Number(copyPort), true);
    console.log("ready");
  } else {
    const workers = Number(count);
    const port = await serve(certFile, keyFile, 0, workers > 1);
    for (let i = 1; i < workers; i++) await startCopy(mode, certFile, keyFile, port);
    // The bench stops this process with SIGTERM; its copies go with it.
    Deno.addSignalListener("SIGTERM", () => {
      for (const child of copies) child.kill("SIGTERM");
      Deno.exit(0);
    });
    console.log(`listening ${port}`);
  }
}
