/**
 * Settings of listener and process: where the public port listens, how many threads serve it, the admin listener, shutdown and the pid file.
 * Each row is placed in the `--help` order by `SETTINGS` in ../settings.ts.
 *
 * @module
 */
import { type Setting, setting } from "../setting.ts";
import {
  parseBoolean,
  parseDurationSetting,
  parsePort,
  parseText,
  parseWorkers,
} from "../parsers.ts";

/** The server settings. */
export const SERVER_SETTINGS: readonly Setting[] = [
  setting({
    key: "port",
    flag: "port",
    env: "KEYGATE_PORT",
    default: "8443",
    parse: parsePort,
    placeholder: "N",
    description: "HTTPS port to listen on; 0 picks a free port",
  }),
  setting({
    key: "hostname",
    flag: "hostname",
    env: "KEYGATE_HOSTNAME",
    default: "0.0.0.0",
    parse: parseText,
    placeholder: "HOST",
    description: "Address to listen on (127.0.0.1 with --behind-proxy)",
  }),
  setting({
    key: "admin",
    flag: "admin",
    env: "KEYGATE_ADMIN",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description:
      "Serve the admin API (/admin/v1/) and web console over HTTPS on a separate listener",
  }),
  setting({
    key: "adminHostname",
    flag: "admin-hostname",
    env: "KEYGATE_ADMIN_HOSTNAME",
    default: "127.0.0.1",
    parse: parseText,
    placeholder: "HOST",
    description:
      "Address of the admin listener (reach it through an SSH tunnel or a private network)",
  }),
  setting({
    key: "adminPort",
    flag: "admin-port",
    env: "KEYGATE_ADMIN_PORT",
    default: "9444",
    parse: parsePort,
    placeholder: "N",
    description:
      "Port of the admin listener (HTTPS with keygate's certificate; never the public port)",
  }),
  setting({
    key: "workers",
    flag: "workers",
    env: "KEYGATE_WORKERS",
    default: "1",
    parse: parseWorkers,
    placeholder: "N|auto",
    description: 'Request-serving threads sharing the port, or "auto" (one per CPU core)',
  }),
  setting({
    key: "shutdownTimeoutSeconds",
    flag: "shutdown-timeout",
    env: "KEYGATE_SHUTDOWN_TIMEOUT",
    default: "30s",
    parse: parseDurationSetting,
    placeholder: "DURATION",
    description: "How long in-flight requests may take to finish after SIGTERM",
  }),
  setting({
    key: "pidFile",
    flag: "pid-file",
    env: "KEYGATE_PID_FILE",
    parse: parseText,
    placeholder: "PATH",
    description: "Write the process id to this file while serving, for kill $(cat PATH)",
  }),
];
