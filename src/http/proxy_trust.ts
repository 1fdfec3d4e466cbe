/**
 * Proxy mode (`--trusted-proxies`): plain HTTP behind a TLS-terminating
 * proxy. The peer must be a trusted proxy and say the client used HTTPS; the
 * client's address then comes from `X-Forwarded-For`. A request whose header names
 * no address outside the trusted proxies has a proxy's address, which every such
 * request shares: the portal refuses it ({@link createNamedClientCheck}).
 *
 * @module
 */
import { createAddressMatcher, findForwardedClient } from "../platform/ip.ts";
import type { Logger } from "../platform/logger.ts";
import type { ProxyOptions, RequestContext } from "./context.ts";
import { HttpError } from "./errors.ts";

/** Checks one request in proxy mode and fills in the client's scheme and address. */
export type ProxyTrust = (request: Request, context: RequestContext) => void;

/** Creates proxy mode's check. */
export function createProxyTrust(options: ProxyOptions): ProxyTrust {
  const isTrustedProxy = createAddressMatcher(options.trustedProxies);
  return function acceptProxied(request, context) {
    const peer = context.peerAddress;
    if (!isTrustedProxy(peer)) {
      throw new HttpError(403, "untrusted_proxy", "Requests must come through the proxy");
    }
    const proto = request.headers.get("x-forwarded-proto");
    if (proto === null || proto.trim().toLowerCase() !== "https") {
      throw new HttpError(403, "https_required", "HTTPS required: the proxy must forward HTTPS");
    }
    const forwardedFor = request.headers.get("x-forwarded-for")?.trim();
    context.scheme = "https";
    context.forwardedFor = forwardedFor || undefined;
    context.clientAddress = findForwardedClient(peer, forwardedFor ?? null, isTrustedProxy);
    // Without the header, or when it ends in no address or names only proxies, the walk
    // stops at a proxy: its address is every such request's.
    context.clientNamed = !isTrustedProxy(context.clientAddress);
  };
}

/**
 * Proxy mode's check for the portal, whose throttles count per client address: refuses a
 * request whose proxy named no client, and logs a warning the first time (an operator's proxy
 * setting, not a client's doing). Falling back to the peer's address would put every such
 * request on the proxy's one counter: one client's failures would block everyone, and guesses
 * from everywhere would pool.
 * @throws {HttpError} 403 `forwarded_for_required`.
 */
export function createNamedClientCheck(logger: Pick<Logger, "warn">) {
  let warned = false;
  return function requireNamedClient(context: RequestContext): void {
    if (context.clientNamed !== false) return;
    if (!warned) {
      warned = true;
      logger.warn("portal request without X-Forwarded-For refused", {
        peer: context.peerAddress,
        hint: "the proxy must append the client's address to X-Forwarded-For",
      });
    }
    throw new HttpError(
      403,
      "forwarded_for_required",
      "The proxy sent no client address: the portal needs X-Forwarded-For",
    );
  };
}
