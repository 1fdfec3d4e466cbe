/**
 * The bench's "Introspection against the peer" section: oidc-provider
 * answering RFC 7662 introspection beside keygate's, fixed and Lua loads,
 * in alternating rounds; and the secure path's rate beside them when the
 * secure section ran.
 *
 * @module
 */
import type { BenchContext, SectionReport } from "./context.ts";
import { PEER_CLIENT_ID, PEER_CLIENT_SECRET } from "./peer_server.ts";
import { formatRatio, type Row } from "./report.ts";
import { pinTo, startServer } from "./servers.ts";
import type { Load } from "./wrk.ts";

const INTROSPECT_PATH = "/api/userservice/tokens/introspect";
const PEER_INTROSPECT_PATH = "/token/introspection";
const RATIO_PEER = "keygate/peer, same load";

/** Runs the section on the shared keygate of the big database. */
export async function runIntrospectionSection(ctx: BenchContext): Promise<SectionReport> {
  const keygate = await ctx.bigKeygate();
  ctx.log(`starting the peer (oidc-provider) with ${ctx.sampleSize.toLocaleString("en")} tokens`);
  const peerPairs = `${ctx.work}/peer.pairs`;
  const peer = await startServer(
    ctx.work,
    "peer",
    pinTo(
      ctx.serverCore,
      ctx.denoRun(
        [
          "--config",
          new URL("./peer.json", import.meta.url).pathname,
          "--lock",
          new URL("./peer.lock", import.meta.url).pathname,
          "--allow-net",
          "--allow-read",
          "--allow-write",
          "--allow-env",
          "--allow-sys",
        ],
        "./peer_server.ts",
        [`${ctx.work}/cert.pem`, `${ctx.work}/key.pem`, peerPairs, String(ctx.sampleSize)],
      ),
    ),
    /listening (\d+)/,
  );
  const peerToken = (await Deno.readTextFile(peerPairs)).split("\n")[0].split(" ")[1];
  const basic = `Basic ${btoa(`${PEER_CLIENT_ID}:${PEER_CLIENT_SECRET}`)}`;
  const form = { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" };
  const introspector = ctx.issuers[0].apiKey;
  const loads: Record<string, Load> = {
    "peer, fixed": {
      kind: "fixed",
      url: `${peer.origin}${PEER_INTROSPECT_PATH}`,
      method: "POST",
      headers: { ...form, Authorization: basic },
      body: `token=${peerToken}`,
    },
    "keygate, fixed": {
      kind: "fixed",
      url: `${keygate.origin}${INTROSPECT_PATH}`,
      method: "POST",
      headers: { ...form, "X-Api-Key": introspector },
      body: `token=${ctx.sample[0].token}`,
    },
    "peer, lua": ctx.lua(
      `${peer.origin}${PEER_INTROSPECT_PATH}`,
      peerPairs,
      "introspect",
      "Authorization",
      basic,
    ),
    "keygate, lua": ctx.lua(
      `${keygate.origin}${INTROSPECT_PATH}`,
      ctx.pairs,
      "introspect",
      "X-Api-Key",
      introspector,
    ),
  };
  ctx.log("warming up the peer");
  await ctx.measure(peer, loads["peer, lua"], { duration: 2 });
  await ctx.measure(keygate, loads["keygate, lua"], { duration: 2 });
  const introspection = await ctx.alternate(
    "introspection",
    Object.fromEntries(
      Object.entries(loads).map(([name, load]) => [
        name,
        () => ctx.measure(name.startsWith("peer") ? peer : keygate, load),
      ]),
    ),
  );
  const peerRss = peer.readRssMiB();
  await peer.stop();
  const peerName = "oidc-provider 9.13.3 (under Deno)";
  const luaLoad = `Lua, ${ctx.sampleSize.toLocaleString("en")} tokens`;
  const rows: Row[] = [];
  for (const [load, suffix] of [["fixed URL", "fixed"], [luaLoad, "lua"]] as const) {
    const theirs = introspection[`peer, ${suffix}`];
    const ours = introspection[`keygate, ${suffix}`];
    rows.push(
      {
        scenario: "introspection (RFC 7662), opaque token",
        server: peerName,
        load,
        result: theirs,
        rssMiB: peerRss,
      },
      {
        scenario: `introspection (RFC 7662), ${ctx.tokens.toLocaleString("en")} tokens`,
        server: "keygate",
        load,
        result: ours,
        rssMiB: keygate.readRssMiB(),
        extra: { [RATIO_PEER]: formatRatio(ours, theirs) },
      },
    );
  }
  const secureLua = ctx.shared.secureLua;
  if (secureLua !== undefined) {
    rows.push({
      scenario: "secure GET, api_token in query (from the table above)",
      server: "keygate",
      load: luaLoad,
      result: secureLua,
      extra: { [RATIO_PEER]: formatRatio(secureLua, introspection["peer, lua"]) },
    });
  }
  return { title: "Introspection against the peer", rows, columns: [RATIO_PEER] };
}
