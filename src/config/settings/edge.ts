/**
 * Settings of the HTTP edge: CORS, proxy mode and forward-auth, path rules, the upstream.
 * Each row is placed in the `--help` order by `SETTINGS` in ../settings.ts.
 *
 * @module
 */
import { type Setting, setting } from "../setting.ts";
import {
  parseBoolean,
  parseCidrList,
  parseDurationSetting,
  parseForwardAuthHeader,
  parseHttpsOrigin,
  parseOrigins,
  parseUpstreamUrl,
} from "../parsers.ts";

/** The edge settings. */
export const EDGE_SETTINGS: readonly Setting[] = [
  setting({
    key: "corsOrigins",
    flag: "cors-origins",
    env: "KEYGATE_CORS_ORIGINS",
    default: "*",
    parse: parseOrigins,
    placeholder: "ORIGINS",
    description: 'Comma-separated origins allowed by CORS, or "*"',
  }),
  setting({
    key: "behindProxy",
    flag: "behind-proxy",
    env: "KEYGATE_BEHIND_PROXY",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Plain HTTP on a loopback or private address, behind a TLS proxy",
  }),
  setting({
    key: "trustedProxies",
    flag: "trusted-proxies",
    env: "KEYGATE_TRUSTED_PROXIES",
    default: "127.0.0.1/32,::1/128",
    parse: parseCidrList,
    placeholder: "CIDRS",
    description: "Comma-separated ranges of the proxies allowed to connect in proxy mode",
  }),
  setting({
    key: "forwardAuthHeader",
    flag: "forward-auth-header",
    env: "KEYGATE_FORWARD_AUTH_HEADER",
    default: "either",
    parse: parseForwardAuthHeader,
    placeholder: "HEADER",
    description: "Header naming forward-auth's original request: x-original-uri (nginx), " +
      "x-forwarded-uri (Caddy, Traefik), or either (refused when both are sent)",
  }),
  setting({
    key: "issuer",
    flag: "issuer",
    env: "KEYGATE_ISSUER",
    parse: parseHttpsOrigin,
    placeholder: "URL",
    description: "The issuer of the OAuth metadata (https://HOST[:PORT]); default: the origin " +
      "each request asked (its Host)",
  }),
  setting({
    key: "unicodePaths",
    flag: "unicode-paths",
    env: "KEYGATE_UNICODE_PATHS",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Accept non-ASCII letters in path segments (off: refuse them with 400)",
  }),
  setting({
    key: "upstream",
    flag: "upstream",
    env: "KEYGATE_UPSTREAM",
    parse: parseUpstreamUrl,
    placeholder: "URL",
    description: "Forward authenticated requests for other paths here (default: 404)",
  }),
  setting({
    key: "upstreamTimeoutSeconds",
    flag: "upstream-timeout",
    env: "KEYGATE_UPSTREAM_TIMEOUT",
    default: "30s",
    parse: parseDurationSetting,
    placeholder: "DURATION",
    description: "How long the upstream may take to start its response before 504",
  }),
  setting({
    key: "hideCredentials",
    flag: "hide-credentials",
    env: "KEYGATE_HIDE_CREDENTIALS",
    default: "on",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Strip the API key and token from forwarded requests",
  }),
  setting({
    key: "limitHeaders",
    flag: "limit-headers",
    env: "KEYGATE_LIMIT_HEADERS",
    default: "on",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Send RateLimit-Policy and RateLimit headers on answers to keys with limits",
  }),
  setting({
    key: "limitLeaseAhead",
    flag: "limit-lease-ahead",
    env: "KEYGATE_LIMIT_LEASE_AHEAD",
    default: "on",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Lease a limit's next window before it starts (off while servers of 0.17 or " +
      "earlier share the database)",
  }),
];
