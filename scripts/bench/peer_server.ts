/**
 * The benchmark's peer: `oidc-provider` (the certified OpenID provider for
 * Node.js, run here under Deno's Node compatibility) answering RFC 7662
 * introspection of opaque access tokens over HTTPS.
 *
 * It mints COUNT access tokens in-process, each with its own grant as a real
 * authorization flow would leave it, writes them one a line to TOKENS_FILE,
 * and serves `POST /token/introspection` to the client `rs` authenticating
 * with `client_secret_basic`. Tokens and grants live in a plain in-memory Map
 * adapter: the library's own development adapter is an LRU of 1,000 entries,
 * which would evict most of the tokens the benchmark cycles through. A Map is
 * the cheapest store the peer can have, so the comparison favours the peer.
 *
 * Usage: deno run --allow-net --allow-read --allow-write --allow-env --allow-sys
 *          scripts/bench/peer_server.ts CERT_FILE KEY_FILE TOKENS_FILE COUNT
 * Prints `listening PORT` once ready.
 *
 * Bench-only: nothing in src/ or tests/ imports this file or oidc-provider.
 *
 * @module
 */
import { createServer } from "node:https";

/** The introspecting client (a resource server) and its secret. */
export const PEER_CLIENT_ID = "rs";
export const PEER_CLIENT_SECRET = "bench-introspection-secret";

// A specifier held in a variable keeps oidc-provider out of the module graph that
// `deno check` and the tests load: only this bench script, when run, fetches it.
const PEER_MODULE = "oidc-provider";

type Payload = Record<string, unknown>;

/** oidc-provider's adapter interface over one Map per model, without expiry eviction. */
class MapAdapter {
  static #models = new Map<string, Map<string, Payload>>();
  #entries: Map<string, Payload>;

  constructor(model: string) {
    let entries = MapAdapter.#models.get(model);
    if (entries === undefined) MapAdapter.#models.set(model, entries = new Map());
    this.#entries = entries;
  }
  upsert(id: string, payload: Payload) {
    this.#entries.set(id, payload);
    return Promise.resolve();
  }
  find(id: string) {
    return Promise.resolve(this.#entries.get(id));
  }
  findByUserCode(_userCode: string) {
    return Promise.resolve(undefined);
  }
  findByUid(_uid: string) {
    return Promise.resolve(undefined);
  }
  consume(id: string) {
    const payload = this.#entries.get(id);
    if (payload !== undefined) payload.consumed = Math.floor(Date.now() / 1000);
    return Promise.resolve();
  }
  destroy(id: string) {
    this.#entries.delete(id);
    return Promise.resolve();
  }
  revokeByGrantId(grantId: string) {
    for (const [id, payload] of this.#entries) {
      if (payload.grantId === grantId) this.#entries.delete(id);
    }
    return Promise.resolve();
  }
}

if (import.meta.main) {
  const [certFile, keyFile, tokensFile, count] = Deno.args;
  // deno-lint-ignore no-explicit-any
  const { default: Provider } = await import(PEER_MODULE) as { default: any };
  const provider = new Provider("https://127.0.0.1", {
    adapter: MapAdapter,
    clients: [{
      client_id: PEER_CLIENT_ID,
      client_secret: PEER_CLIENT_SECRET,
      token_endpoint_auth_method: "client_secret_basic",
      grant_types: [],
      response_types: [],
      redirect_uris: [],
    }],
    features: {
      introspection: { enabled: true, allowedPolicy: () => true },
      devInteractions: { enabled: false },
    },
    ttl: { AccessToken: 86_400, Grant: 86_400 },
  });
  const client = await provider.Client.find(PEER_CLIENT_ID);
  const tokens: string[] = [];
  for (let i = 0; i < Number(count); i++) {
    const accountId = `user${i}`;
    const grant = new provider.Grant({ accountId, clientId: PEER_CLIENT_ID });
    grant.addOIDCScope("openid");
    const grantId = await grant.save();
    const token = new provider.AccessToken({ accountId, client, grantId, scope: "openid" });
    tokens.push(await token.save());
  }
  Deno.writeTextFileSync(tokensFile, tokens.map((t) => `- ${t} -`).join("\n") + "\n");
  const server = createServer({
    cert: Deno.readTextFileSync(certFile),
    key: Deno.readTextFileSync(keyFile),
  }, provider.callback());
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    console.log(`listening ${typeof address === "object" && address ? address.port : ""}`);
  });
}
