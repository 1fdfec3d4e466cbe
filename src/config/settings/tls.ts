/**
 * Settings of TLS: the certificate pair, its reload, the self-signed fallback.
 * Each row is placed in the `--help` order by `SETTINGS` in ../settings.ts.
 *
 * @module
 */
import { type Setting, setting } from "../setting.ts";
import { parseOptionalInterval, parseText } from "../parsers.ts";

/** The tls settings. */
export const TLS_SETTINGS: readonly Setting[] = [
  setting({
    key: "certFile",
    flag: "cert",
    env: "KEYGATE_TLS_CERT",
    parse: parseText,
    placeholder: "FILE",
    description: "TLS certificate chain, PEM, with --key (default: self-signed)",
  }),
  setting({
    key: "keyFile",
    flag: "key",
    env: "KEYGATE_TLS_KEY",
    parse: parseText,
    placeholder: "FILE",
    description: "TLS private key, PEM, with --cert",
  }),
  setting({
    key: "certReloadIntervalSeconds",
    flag: "cert-reload-interval",
    env: "KEYGATE_CERT_RELOAD_INTERVAL",
    default: "1m",
    parse: parseOptionalInterval,
    placeholder: "DURATION",
    description: "How often --cert and --key are checked for a renewed pair; 0: only on SIGHUP",
  }),
  setting({
    key: "selfSignedDir",
    flag: "self-signed-dir",
    env: "KEYGATE_SELF_SIGNED_DIR",
    parse: parseText,
    placeholder: "DIR",
    description: "Without --cert: keep the self-signed pair here (default: beside the SQLite " +
      "file; on PostgreSQL, a new one in memory at each start)",
  }),
];
