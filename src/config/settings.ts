/**
 * The one table of server settings. Each row names the flag, its
 * environment variable, the default (as text, parsed like any other source),
 * the parser that turns text into the typed value, the placeholder `--help`
 * shows and what the setting means. `readConfig` and `--help` are generated
 * from it.
 *
 * The rows are defined by group in `settings/` (server, edge, TLS, store, auth,
 * observability, portal); this module assembles them into one table in `--help`
 * order. A new setting (such as `--store URL` / `KEYGATE_STORE`) is one new
 * row in its group, one new {@link Config} property and its place in
 * `HELP_ORDER`; `deno check` refuses a property left out of the order.
 *
 * @module
 */
import type { Config } from "./config.ts";
import type { Setting } from "./setting.ts";
import { AUTH_SETTINGS } from "./settings/auth.ts";
import { EDGE_SETTINGS } from "./settings/edge.ts";
import { OBSERVABILITY_SETTINGS } from "./settings/observability.ts";
import { PORTAL_SETTINGS } from "./settings/portal.ts";
import { SERVER_SETTINGS } from "./settings/server.ts";
import { STORE_SETTINGS } from "./settings/store.ts";
import { TLS_SETTINGS } from "./settings/tls.ts";

export type { Config } from "./config.ts";
export { isBooleanSetting, type Setting } from "./setting.ts";

/** Every setting's {@link Config} property, in `--help` order. */
const HELP_ORDER = [
  "port",
  "hostname",
  "dbPath",
  "store",
  "storeStalenessSeconds",
  "storeListen",
  "grantCacheSize",
  "certFile",
  "keyFile",
  "certReloadIntervalSeconds",
  "selfSignedDir",
  "defaultTimeoutSeconds",
  "corsOrigins",
  "logLevel",
  "upstream",
  "upstreamTimeoutSeconds",
  "hideCredentials",
  "limitHeaders",
  "limitLeaseAhead",
  "metrics",
  "metricsHostname",
  "metricsPort",
  "admin",
  "adminHostname",
  "adminPort",
  "behindProxy",
  "trustedProxies",
  "forwardAuthHeader",
  "issuer",
  "unicodePaths",
  "tokenRetentionSeconds",
  "auditRetentionSeconds",
  "shutdownTimeoutSeconds",
  "loginQueueWaitSeconds",
  "workers",
  "pidFile",
  "portal",
  "portalMode",
  "portalDomains",
  "portalExistingUsers",
  "portalSecretFile",
  "smtpUrl",
  "mailFrom",
  "portalOrigin",
  "portalUnverifiedTtlSeconds",
] as const satisfies readonly (keyof Config)[];

/** Compiles only while every {@link Config} property has its place in `HELP_ORDER`. */
const ORDER_IS_COMPLETE: [Exclude<keyof Config, typeof HELP_ORDER[number]>] extends [never] ? true
  : never = true;

/** Every server setting, in `--help` order. */
export const SETTINGS: readonly Setting[] = inHelpOrder([
  ...SERVER_SETTINGS,
  ...EDGE_SETTINGS,
  ...TLS_SETTINGS,
  ...STORE_SETTINGS,
  ...AUTH_SETTINGS,
  ...OBSERVABILITY_SETTINGS,
  ...PORTAL_SETTINGS,
]);

function inHelpOrder(rows: readonly Setting[]): Setting[] {
  const byKey = new Map(rows.map((row) => [row.key, row]));
  if (!ORDER_IS_COMPLETE || byKey.size !== rows.length || byKey.size !== HELP_ORDER.length) {
    throw new Error("The settings groups and HELP_ORDER do not name the same settings");
  }
  return HELP_ORDER.map((key) => {
    const row = byKey.get(key);
    if (row === undefined) throw new Error(`No settings group defines "${key}"`);
    return row;
  });
}
