/**
 * The benchmark's ceiling: a bare `Deno.serve` over HTTPS answering 3 bytes,
 * optionally on N listeners sharing one port with `reusePort`, in N threads
 * (Web Workers) or N processes, to compare the two ways of using more cores.
 *
 * Usage: deno run --allow-net --allow-read [--allow-run] --unstable-net
 *          scripts/bench/bare_server.ts CERT_FILE KEY_FILE [N [threads|processes]]
 * Prints `listening PORT` once every listener is ready.
 *
 * @module
 */
const BODY = new TextEncoder().encode("ok\n");

/** Serves on `port` (0: any) and resolves to the port bound. */
function serve(certFile: string, keyFile: string, port: number, reusePort: boolean) {
  return new Promise<number>((resolve) => {
    Deno.serve({
      hostname: "127.0.0.1",
      port,
      reusePort,
      cert: Deno.readTextFileSync(certFile),
      key: Deno.readTextFileSync(keyFile),
      onListen: ({ port }) => resolve(port),
    }, () => new Response(BODY));
  });
}

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
  const [certFile, keyFile, count = "1", mode = "threads", copyPort] = Deno.args;
  if (mode === "copy") {
    await serve(certFile, keyFile, Number(copyPort), true);
    console.log("ready");
  } else {
    const workers = Number(count);
    const port = await serve(certFile, keyFile, 0, workers > 1);
    for (let i = 1; i < workers; i++) await startCopy(mode, certFile, keyFile, port);
    console.log(`listening ${port}`);
  }
}
