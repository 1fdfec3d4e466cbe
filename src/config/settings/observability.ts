/**
 * Settings of observability: the log level and the Prometheus listener.
 * Each row is placed in the `--help` order by `SETTINGS` in ../settings.ts.
 *
 * @module
 */
import { type Setting, setting } from "../setting.ts";
import { parseBoolean, parseLogLevel, parsePort, parseText } from "../parsers.ts";

/** The observability settings. */
export const OBSERVABILITY_SETTINGS: readonly Setting[] = [
  setting({
    key: "logLevel",
    flag: "log-level",
    env: "KEYGATE_LOG_LEVEL",
    default: "info",
    parse: parseLogLevel,
    placeholder: "LEVEL",
    description: "debug, info, warn, error or off",
  }),
  setting({
    key: "metrics",
    flag: "metrics",
    env: "KEYGATE_METRICS",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Serve Prometheus metrics at /metrics on a separate listener",
  }),
  setting({
    key: "metricsHostname",
    flag: "metrics-hostname",
    env: "KEYGATE_METRICS_HOSTNAME",
    default: "127.0.0.1",
    parse: parseText,
    placeholder: "HOST",
    description: "Address of the metrics listener",
  }),
  setting({
    key: "metricsPort",
    flag: "metrics-port",
    env: "KEYGATE_METRICS_PORT",
    default: "9464",
    parse: parsePort,
    placeholder: "N",
    description: "Port of the metrics listener (plain HTTP; never the public port)",
  }),
];
