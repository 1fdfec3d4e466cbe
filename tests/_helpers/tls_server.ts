/** The handler served over real TLS on 127.0.0.1 and a free port, with a client that trusts it. */
import type { Handler } from "../../src/http/app.ts";
import { generateSelfSigned } from "../../src/platform/tls.ts";

let certificate: Promise<{ cert: string; key: string }> | undefined;

/** One self-signed certificate per test run. */
export function testCertificate(): Promise<{ cert: string; key: string }> {
  certificate ??= generateSelfSigned();
  return certificate;
}

export interface TlsServer {
  origin: string;
  client: Deno.HttpClient;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Serves `handler` over real TLS on 127.0.0.1 and a free port. */
export async function startTlsServer(handler: Handler): Promise<TlsServer> {
  const { cert, key } = await testCertificate();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert, key, onListen: () => {} },
    handler,
  );
  const client = Deno.createHttpClient({ caCerts: [cert] });
  const close = async () => {
    client.close();
    await server.shutdown();
  };
  return {
    origin: `https://127.0.0.1:${server.addr.port}`,
    client,
    close,
    [Symbol.asyncDispose]: close,
  };
}
