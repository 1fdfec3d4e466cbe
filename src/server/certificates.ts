/**
 * Which certificate each HTTPS listener serves: `--cert` and `--key`, or
 * without them keygate's self-signed pair, for the public listener (unless
 * behind a proxy, where it speaks plain HTTP) and the admin listener.
 *
 * @module
 */
import { dirname } from "node:path";
import { explainSelfSignedError, prepareSelfSignedDir, readTlsFiles } from "../config/preflight.ts";
import type { Config } from "../config/settings.ts";
import type { Logger } from "../platform/logger.ts";
import { loadSelfSigned, type TlsCredentials } from "../platform/tls.ts";
import type { StoreLocation } from "../store/store_url.ts";

type Pem = { cert: string; key: string };

/** The pairs the listeners start with. */
export interface Certificates {
  /** The API's; undefined behind a proxy (plain HTTP). */
  api?: Pem;
  /** The admin listener's; undefined without `--admin`. */
  admin?: Pem;
  /** keygate's own pair, when there is no `--cert`/`--key` and a listener needs one. */
  selfSigned?: TlsCredentials;
}

/** Reads `--cert`/`--key`, or loads (or makes) the self-signed pair where one is needed. */
export async function loadCertificates(
  config: Config,
  store: StoreLocation,
): Promise<Certificates> {
  const selfSigned = config.certFile === undefined && (!config.behindProxy || config.admin)
    ? await loadSelfSignedPair(config, store)
    : undefined;
  const tls: Pem | undefined = config.behindProxy
    ? undefined
    : config.certFile !== undefined && config.keyFile !== undefined
    ? await readTlsFiles(config.certFile, config.keyFile)
    : selfSigned;
  const api = tls === undefined ? undefined : { cert: tls.cert, key: tls.key };
  // Behind a proxy, where keygate has no pair of its own, the admin listener uses the self-signed.
  return { api, admin: config.admin ? tls ?? selfSigned : undefined, selfSigned };
}

/** Warns that the self-signed pair is in use (it is not for production). */
export function warnSelfSigned(logger: Logger, certificates: Certificates): void {
  const pair = certificates.selfSigned;
  if (pair === undefined) return;
  logger.warn(
    pair.selfSignedPath === undefined
      ? "using a self-signed certificate for localhost, made for this process and kept in " +
        "memory only (--self-signed-dir keeps one); pass --cert and --key in production"
      : `using a self-signed certificate for localhost (${pair.selfSignedPath}); ` +
        "pass --cert and --key in production",
    { sha256_fingerprint: pair.fingerprint },
  );
}

/**
 * The self-signed pair when there is no --cert/--key: kept in --self-signed-dir, else beside a
 * SQLite database, else (PostgreSQL, :memory:) generated in memory for this process.
 */
async function loadSelfSignedPair(config: Config, store: StoreLocation): Promise<TlsCredentials> {
  let dir: string | undefined;
  let setting = "--self-signed-dir";
  if (config.selfSignedDir !== undefined) {
    dir = config.selfSignedDir;
    prepareSelfSignedDir(dir, setting);
  } else if (store.kind === "sqlite" && store.path !== ":memory:") {
    dir = dirname(store.path); // made by prepareDatabasePath
    setting = "the database's directory";
  }
  try {
    return await loadSelfSigned(dir);
  } catch (error) {
    if (dir === undefined) throw error;
    throw explainSelfSignedError(error, dir, setting);
  }
}
