/**
 * The benchmark's ceiling: a bare `Deno.serve` over HTTPS answering 3 bytes.
 *
 * Usage: deno run --allow-net --allow-read scripts/bench/bare_server.ts CERT_FILE KEY_FILE
 * Prints `listening PORT` once ready.
 */
const [certFile, keyFile] = Deno.args;
const body = new TextEncoder().encode("ok\n");
Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  cert: Deno.readTextFileSync(certFile),
  key: Deno.readTextFileSync(keyFile),
  onListen: ({ port }) => console.log(`listening ${port}`),
}, () => new Response(body));
