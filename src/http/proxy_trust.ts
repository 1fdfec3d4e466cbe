/**
 * Proxy mode (`--trusted-proxies`): plain HTTP behind a TLS-terminating
 * proxy. The peer must be a trusted proxy and say the client used HTTPS; the
 * client's address then comes from `X-Forwarded-For`.
 *
 * @module
 */
import { createAddressMatcher, findForwardedClient } from "../platform/ip.ts";
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
  };
}
