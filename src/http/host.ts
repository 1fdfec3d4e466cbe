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

/** How many accepted hosts a reader remembers: nearly every request names the same one or two. */
const REMEMBERED_HOSTS = 256;

/** Reads a request's `Host`; see {@link createHostReader}. */
export type HostReader = (request: Request) => string;

/**
 * A reader of the `Host` a listener answered on (never the authority of an
 * absolute-form target), checked. Each listener makes its own: the hosts it
 * accepted lately are remembered in the reader, never in the module.
 */
export function createHostReader(): HostReader {
  const accepted = new Set<string>();

  /** @throws {HttpError} 400 `invalid_host` for a malformed `Host`. */
  return function readHost(request: Request): string {
    const hostHeader = request.headers.get("host");
    // No Host (HTTP/1.0): Deno.serve fills in its own authority; nothing of the client's.
    const host = hostHeader === null || hostHeader === ""
      ? /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(request.url)?.[1] ?? ""
      : hostHeader;
    if (accepted.has(host)) return host;
    const match = HOST.exec(host);
    if (match === null || (match[1] !== undefined && Number(match[1]) > 65535)) {
      throw invalidHost();
    }
    // The URL parser refuses more (an IPv4 octet over 255, a broken xn-- label): every route
    // reads Host alike, whether or not it ever builds the request's URL.
    if (!URL.canParse(`https://${host}/`)) throw invalidHost();
    if (accepted.size >= REMEMBERED_HOSTS) accepted.clear();
    accepted.add(host);
    return host;
  };
}
