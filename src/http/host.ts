/**
 * The `Host` rule of both listeners (the public API's and the admin
 * listener's): a DNS name, IPv4 address or bracketed IPv6 address, and an
 * optional port up to 65535. Anything else (`/`, `?`, `@`, spaces, a bad port)
 * is 400 `invalid_host`: `Deno.serve` pastes `Host` into `Request.url` as it
 * came, where such characters would change the path a router reads, and a
 * port the URL parser refuses would make `new URL(request.url)` throw.
 *
 * @module
 */
import { HttpError } from "./errors.ts";

const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?\.?|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/;

/** The answer to a malformed `Host`. */
export function invalidHost(): HttpError {
  return new HttpError(400, "invalid_host", "Invalid Host header: expected a host name and port");
}

/** Hosts {@link readHost} accepted lately: nearly every request names the same one or two. */
const acceptedHosts = new Set<string>();

/**
 * The `Host` a listener answered on (never the authority of an absolute-form
 * target), checked.
 *
 * @throws {HttpError} 400 `invalid_host` for a malformed `Host`.
 */
export function readHost(request: Request): string {
  const hostHeader = request.headers.get("host");
  // No Host (HTTP/1.0): Deno.serve fills in its own authority; nothing of the client's.
  const host = hostHeader === null || hostHeader === ""
    ? /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(request.url)?.[1] ?? ""
    : hostHeader;
  if (acceptedHosts.has(host)) return host;
  const match = HOST.exec(host);
  if (match === null || (match[1] !== undefined && Number(match[1]) > 65535)) throw invalidHost();
  // The URL parser refuses more (an IPv4 octet over 255, a broken xn-- label): every route
  // reads Host alike, whether or not it ever builds the request's URL.
  if (!URL.canParse(`https://${host}/`)) throw invalidHost();
  if (acceptedHosts.size >= 256) acceptedHosts.clear();
  acceptedHosts.add(host);
  return host;
}
