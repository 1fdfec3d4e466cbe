/**
 * The security headers of each listener: the public API's on every response,
 * and the admin listener's, which add the web console's policy.
 *
 * @module
 */
import type { HeaderPair } from "./pipeline.ts";

/** On every response of every listener: HTTPS only, no sniffing, no caching. */
export const API_SECURITY_HEADERS: readonly HeaderPair[] = [
  ["strict-transport-security", "max-age=31536000; includeSubDomains"],
  ["x-content-type-options", "nosniff"],
  ["cache-control", "no-store"],
];

/** The console's policy: everything from this origin, nothing inline, no frames, no plugins. */
export const ADMIN_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** The admin listener's: the API's, and the console's policy, no referrer, no framing. */
export const ADMIN_SECURITY_HEADERS: readonly HeaderPair[] = [
  ["content-security-policy", ADMIN_CSP],
  ...API_SECURITY_HEADERS,
  ["referrer-policy", "no-referrer"],
  ["x-frame-options", "DENY"],
  ["cross-origin-opener-policy", "same-origin"],
  ["cross-origin-resource-policy", "same-origin"],
];
