/**
 * The TLS metrics: when each HTTPS listener's serving certificate expires,
 * and certificate reloads by outcome. Registered in the main thread's
 * registry (reloads run there, for every worker).
 *
 * @module
 */
import { Counter, Gauge, type Registry } from "prom-client";

/** What a reload came to: a new pair served, a pair refused, or the same files again. */
export type ReloadOutcome = "reloaded" | "refused" | "failed" | "unchanged";

/** The TLS metrics, registered by {@link TlsMetrics.register}. */
export interface TlsMetrics {
  /** Adds the metrics to `registry` (pass it as createMetrics's `register`). */
  register(registry: Registry): void;
  /** The certificate `listener` (`api`, `admin`) now serves expires at `notAfter`. */
  setExpiry(listener: string, notAfter: Date): void;
  /** A reload ended with `outcome`. */
  countReload(outcome: ReloadOutcome): void;
}

/** Creates the TLS metrics, unregistered. */
export function createTlsMetrics(): TlsMetrics {
  const expiry = new Gauge({
    name: "keygate_tls_certificate_expiry_timestamp_seconds",
    help: "When the certificate each HTTPS listener serves expires, in Unix seconds",
    labelNames: ["listener"] as const,
    registers: [],
  });
  const reloads = new Counter({
    name: "keygate_tls_certificate_reloads_total",
    help: "Certificate reloads (SIGHUP or a changed --cert/--key), by outcome",
    labelNames: ["outcome"] as const,
    registers: [],
  });
  for (const outcome of ["reloaded", "refused", "failed", "unchanged"] as const) {
    reloads.inc({ outcome }, 0);
  }
  return {
    register(registry) {
      registry.registerMetric(expiry);
      registry.registerMetric(reloads);
    },
    setExpiry: (listener, notAfter) => expiry.set({ listener }, notAfter.getTime() / 1000),
    countReload: (outcome) => reloads.inc({ outcome }),
  };
}
