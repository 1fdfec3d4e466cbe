/**
 * The one composition of keygate's handlers: configuration plus the services
 * a thread has opened (its store, the password pool, its logger, metrics and
 * key-usage recorder) become the dependencies `createHandler` takes. The main
 * thread runs it for its listener, and every request worker (`--workers N`)
 * runs the same function for its own: one composition, run N times, so that
 * no setting can reach one listener and miss another.
 *
 * @module
 */
import type { KeyUsageRecorder } from "../auth/key_usage.ts";
import type { Limiter } from "../auth/limiter.ts";
import type { StatsHistory } from "../auth/stats_history.ts";
import type { Config } from "../config/settings.ts";
import type { AdminDeps } from "../http/admin/admin_app.ts";
import type { AppDeps, SecureContext } from "../http/context.ts";
import type { Routes } from "../http/route.ts";
import type { PasswordHasher } from "../passwords/passwords.ts";
import { systemClock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { Store } from "../store/store.ts";
import { createPortalThrottle } from "../auth/portal/portal_throttle.ts";
import { readPortalSecretFile } from "../config/portal_secret.ts";

/** What one thread has opened to serve the API with. */
export interface ApiServices {
  store: Store;
  hasher: PasswordHasher;
  logger: Logger;
  metrics: Metrics;
  keyUsage: KeyUsageRecorder;
  /** This thread's limiter (rates and quotas), started and stopped with its listener. */
  limiter: Limiter;
  /** An embedding application's own secure endpoints (main thread only: see main.ts). */
  secureRoutes?: Routes<SecureContext>;
  /** The portal's mailer (main thread only; request workers' mail waits for its next poll). */
  mailer?: { wake(): void };
}

/** The API handler's dependencies, from the configuration and this thread's services. */
export function composeHandlerDeps(config: Config, services: ApiServices): AppDeps {
  // Read by every thread that serves the portal (readConfig requires it with --portal on,
  // main.ts checked it at start): the codes' key and the throttle's.
  const portalKey = config.portal ? readPortalSecretFile(config.portalSecretFile!) : undefined;
  return {
    store: services.store,
    hasher: services.hasher,
    clock: systemClock,
    logger: services.logger,
    defaultTimeoutSeconds: config.defaultTimeoutSeconds,
    corsOrigins: config.corsOrigins,
    keyUsage: services.keyUsage,
    limiter: services.limiter,
    limitHeaders: config.limitHeaders,
    secureRoutes: services.secureRoutes,
    upstream: config.upstream === undefined ? undefined : {
      url: new URL(config.upstream),
      timeoutMs: config.upstreamTimeoutSeconds * 1000,
      hideCredentials: config.hideCredentials,
    },
    metrics: services.metrics,
    // Plain HTTP only behind a proxy, whose HTTPS is checked per request.
    proxy: config.behindProxy ? { trustedProxies: config.trustedProxies } : undefined,
    scheme: config.behindProxy ? "http" : "https",
    unicodePaths: config.unicodePaths,
    forwardAuthHeader: config.forwardAuthHeader,
    issuer: config.issuer,
    grantCacheSize: config.grantCacheSize,
    portal: config.portal
      ? {
        throttle: createPortalThrottle({
          store: services.store,
          clock: systemClock,
          key: portalKey!,
        }),
        mode: config.portalMode,
        domains: config.portalDomains,
        existingUsers: config.portalExistingUsers,
        codeKey: portalKey!,
        origin: config.portalOrigin!, // readConfig requires it with --portal on
        onMailQueued: services.mailer?.wake,
      }
      : undefined,
  };
}

/** What the main thread has opened to serve the admin API and console with. */
export interface AdminServices {
  store: Store;
  hasher: PasswordHasher;
  logger: Logger;
  metrics: Metrics;
  history?: StatsHistory;
}

/** The admin handler's dependencies (the admin listener runs on the main thread only). */
export function composeAdminDeps(config: Config, services: AdminServices): AdminDeps {
  return {
    store: services.store,
    clock: systemClock,
    logger: services.logger,
    hasher: services.hasher,
    readCounters: services.metrics.readCounters,
    defaultTimeoutSeconds: config.defaultTimeoutSeconds,
    history: services.history,
    portalOrigin: config.portal ? config.portalOrigin : undefined,
  };
}
