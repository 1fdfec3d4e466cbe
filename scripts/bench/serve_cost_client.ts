/**
 * The load of serve_cost.ts, in a Web Worker so that its CPU is not the listener's: secure GETs
 * over HTTPS/1.1 with keep-alive (as wrk sends them), `concurrency` at once, walking the sampled
 * tokens in order. Each job is `{ origin, count }`; the answer is `{ failed }` (statuses other
 * than 200) once `count` requests were answered.
 *
 * @module
 */

/** What the worker is started with. */
export interface ClientSetup {
  caCert: string;
  concurrency: number;
  /** `api_key token` pairs. */
  pairs: [string, string][];
}

const PATH = "/api/secure/userservice/tokens/current";
const self = globalThis as unknown as Worker & { onmessage: (event: MessageEvent) => void };
let setup: ClientSetup;
let client: Deno.HttpClient;
let next = 0;

async function runJob(origin: string, count: number): Promise<number> {
  let sent = 0;
  let failed = 0;
  async function loop(): Promise<void> {
    while (sent < count) {
      sent++;
      const [apiKey, token] = setup.pairs[next++ % setup.pairs.length];
      const response = await fetch(`${origin}${PATH}?api_key=${apiKey}&api_token=${token}`, {
        client,
      });
      await response.arrayBuffer();
      if (response.status !== 200) failed++;
    }
  }
  await Promise.all(Array.from({ length: setup.concurrency }, loop));
  return failed;
}

self.onmessage = async (event: MessageEvent) => {
  const data = event.data as { setup?: ClientSetup; origin?: string; count?: number };
  if (data.setup !== undefined) {
    setup = data.setup;
    client = Deno.createHttpClient({ caCerts: [setup.caCert], http1: true, http2: false });
    self.postMessage({ ready: true });
    return;
  }
  self.postMessage({ failed: await runJob(data.origin!, data.count!) });
};
