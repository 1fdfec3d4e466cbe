/**
 * IP addresses for proxy mode: CIDR ranges, loopback and private addresses,
 * and the client address behind a chain of trusted proxies.
 *
 * @module
 */
import ipaddr from "ipaddr.js";

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Range = [Address, number];

/** Parses an address, turning IPv4-mapped IPv6 (`::ffff:10.0.0.1`) into IPv4. */
function toAddress(text: string): Address | undefined {
  const bare = text.trim().replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  if (!ipaddr.isValid(bare)) return undefined;
  try {
    return ipaddr.process(bare);
  } catch {
    return undefined;
  }
}

function toRange(cidr: string): Range | undefined {
  try {
    const [address, bits] = ipaddr.parseCIDR(cidr.trim());
    if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
      return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96];
    }
    return [address, bits];
  } catch {
    return undefined;
  }
}

/** Whether `text` is a CIDR range such as `10.0.0.0/8` or `fd00::/8`. */
export function isCidr(text: string): boolean {
  return toRange(text) !== undefined;
}

/** Whether `hostname` is `localhost` or a loopback or private (RFC 1918, RFC 4193) address. */
export function isLoopbackOrPrivate(hostname: string): boolean {
  if (hostname === "localhost") return true;
  const address = toAddress(hostname);
  return address !== undefined &&
    ["loopback", "private", "uniqueLocal", "linkLocal"].includes(address.range());
}

/** A predicate telling whether an address is in one of the given CIDR ranges. */
export type AddressMatcher = (address: string) => boolean;

/** Compiles a list of CIDR ranges into a matcher. Invalid entries are the caller's check. */
export function createAddressMatcher(cidrs: readonly string[]): AddressMatcher {
  const ranges = cidrs.map(toRange).filter((r): r is Range => r !== undefined);
  return (text) => {
    const address = toAddress(text);
    if (address === undefined) return false;
    return ranges.some(([base, bits]) =>
      base.kind() === address.kind() && address.match(base as never, bits)
    );
  };
}

/**
 * The client address of a request that came from `peer` through proxies,
 * read from `X-Forwarded-For` right to left: the first address that is not a
 * trusted proxy. Only called when `peer` itself is trusted. An entry that is
 * not an address stops the walk at the last trusted hop.
 */
export function findForwardedClient(
  peer: string,
  forwardedFor: string | null,
  isTrusted: AddressMatcher,
): string {
  if (forwardedFor === null) return peer;
  const hops = forwardedFor.split(",").map((hop) => hop.trim()).filter(Boolean);
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const address = toAddress(hops[i]);
    if (address === undefined) return client;
    client = address.toString();
    if (!isTrusted(client)) return client;
  }
  return client;
}
