/**
 * Start-up checks of the settings that name things outside the process: the
 * database path, the PEM files and the listening address. Each failure
 * becomes one {@link StartupError} line naming the flag, the value and what
 * to do, instead of a stack trace.
 *
 * @module
 */
import { mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { StartupError } from "./errors.ts";
import { toErrorText } from "../platform/logger.ts";

/**
 * Checks that `--db` can be a database file and creates its directory.
 *
 * @throws {StartupError} exit 2 for a directory, exit 1 when the directory cannot be made.
 */
export function prepareDatabasePath(path: string): void {
  if (path === ":memory:") return;
  const stat = statOrUndefined(path);
  if (stat?.isDirectory()) {
    throw new StartupError(
      `Invalid --db "${path}": it is a directory; give a file path such as ${
        path.replace(/\/+$/, "")
      }/keygate.sqlite3`,
      2,
    );
  }
  try {
    mkdirSync(dirname(path), { recursive: true });
  } catch (error) {
    throw new StartupError(
      `Cannot create the directory of --db "${path}": ${describeFsError(error)}; ` +
        "choose a writable path or fix the permissions",
      1,
    );
  }
}

/** Turns an error from opening the database into one line naming `--db`. */
export function explainDatabaseError(error: unknown, path: string): StartupError {
  const reason = describeFsError(error);
  return new StartupError(
    `Cannot open --db "${path}": ${reason}; ` +
      (/not a database|malformed/i.test(reason)
        ? "it is not a keygate database; check the path"
        : "check that the file and its directory are writable by this user"),
    1,
  );
}

/**
 * Reads and checks the operator's PEM files: the certificate file must hold a certificate
 * and the key file a private key (catching swapped and garbage files).
 *
 * @throws {StartupError} exit 2, naming the flag and the file.
 */
export async function readTlsFiles(
  certFile: string,
  keyFile: string,
): Promise<{ cert: string; key: string }> {
  const cert = await readPem("--cert", certFile);
  const key = await readPem("--key", keyFile);
  const certHasKey = PRIVATE_KEY.test(cert);
  const keyHasCert = CERTIFICATE.test(key);
  if (certHasKey && keyHasCert && !CERTIFICATE.test(cert)) {
    throw new StartupError(
      `Invalid --cert "${certFile}" and --key "${keyFile}": they are swapped; ` +
        "--cert takes the certificate chain, --key the private key",
      2,
    );
  }
  if (!CERTIFICATE.test(cert)) {
    throw new StartupError(
      `Invalid --cert "${certFile}": no PEM certificate in it (expected "-----BEGIN CERTIFICATE-----"` +
        `${certHasKey ? "; it holds a private key, which belongs in --key" : ""})`,
      2,
    );
  }
  if (!PRIVATE_KEY.test(key)) {
    throw new StartupError(
      `Invalid --key "${keyFile}": no PEM private key in it (expected "-----BEGIN PRIVATE KEY-----"` +
        `${keyHasCert ? "; it holds a certificate, which belongs in --cert" : ""})`,
      2,
    );
  }
  return { cert, key };
}

/** Turns an error of `Deno.serve` into one line naming the flags and what to do. */
export function explainListenError(
  error: unknown,
  where: { hostname: string; port: number; portFlag: string; hostnameFlag: string },
  tls?: { certFile?: string; keyFile?: string },
): StartupError {
  const address = `${where.hostname}:${where.port}`;
  if (error instanceof Deno.errors.AddrInUse) {
    return new StartupError(
      `Cannot listen on ${address} (${where.portFlag} ${where.port}): the address is already ` +
        `in use; stop the other process or choose another ${where.portFlag}`,
      1,
    );
  }
  if (error instanceof Deno.errors.PermissionDenied) {
    return new StartupError(
      `Cannot listen on ${address} (${where.portFlag} ${where.port}): permission denied; ` +
        `ports below 1024 need privileges, choose another ${where.portFlag}`,
      1,
    );
  }
  if (error instanceof Deno.errors.AddrNotAvailable || /lookup address/i.test(String(error))) {
    return new StartupError(
      `Invalid ${where.hostnameFlag} "${where.hostname}": not an address of this machine; ` +
        "use 0.0.0.0, 127.0.0.1 or one of its own addresses",
      2,
    );
  }
  const message = toErrorText(error);
  if (tls?.certFile !== undefined && /certificate|key|KeyMismatch|BadEncoding/i.test(message)) {
    return new StartupError(
      `Invalid --cert "${tls.certFile}" or --key "${tls.keyFile}": ${
        /KeyMismatch/.test(message) ? "the key does not belong to the certificate" : message
      }; give a matching PEM certificate chain and private key`,
      2,
    );
  }
  return new StartupError(`Cannot listen on ${address}: ${message}`, 1);
}

/**
 * Writes the process id to `--pid-file` (replacing a stale file).
 *
 * @throws {StartupError} exit 1 when the file cannot be written.
 */
export function writePidFile(path: string): void {
  try {
    mkdirSync(dirname(path), { recursive: true });
    Deno.writeTextFileSync(path, `${Deno.pid}\n`);
  } catch (error) {
    throw new StartupError(
      `Cannot write --pid-file "${path}": ${describeFsError(error)}; ` +
        "choose a writable path or fix the permissions",
      1,
    );
  }
}

/** Removes `--pid-file` if it still holds this process's id. */
export function removePidFile(path: string): void {
  try {
    if (Deno.readTextFileSync(path).trim() === String(Deno.pid)) Deno.removeSync(path);
  } catch {
    // Already gone or replaced: nothing to clean up.
  }
}

const CERTIFICATE = /-----BEGIN CERTIFICATE-----/;
const PRIVATE_KEY = /-----BEGIN (?:RSA |EC |ENCRYPTED )?PRIVATE KEY-----/;

async function readPem(flag: string, path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    const reason = describeFsError(error);
    if (reason === "permission denied") {
      // The setting is right; the file's owner or mode is not: exit 1, fix the environment.
      throw new StartupError(
        `Cannot read ${flag} "${path}": permission denied for ${describeUser()}; ` +
          "make the file readable by the user keygate runs as (chown or chmod), " +
          "or run keygate as a user that can read it",
        1,
      );
    }
    throw new StartupError(
      `Cannot read ${flag} "${path}": ${reason}; ` +
        `give the path of a PEM file (${flag === "--cert" ? "certificate chain" : "private key"})`,
      2,
    );
  }
}

/** This process's user, for messages: `uid 998` (or `user keygate (uid 998)` when known). */
function describeUser(): string {
  let uid: number | null = null;
  let name: string | undefined;
  try {
    uid = Deno.uid();
    name = Deno.env.get("USER") || Deno.env.get("LOGNAME") || undefined;
  } catch {
    // Without --allow-sys or --allow-env, less is known.
  }
  if (uid === null) return "this user";
  return name === undefined ? `uid ${uid}` : `user ${name} (uid ${uid})`;
}

/**
 * Creates the directory the self-signed pair is kept in (`--self-signed-dir`,
 * or the SQLite database's), mode 0700 when new.
 *
 * @throws {StartupError} exit 1 when it cannot be made.
 */
export function prepareSelfSignedDir(dir: string, setting: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new StartupError(
      `Cannot create ${setting} "${dir}": ${describeFsError(error)}; ` +
        "choose a writable directory or fix the permissions",
      1,
    );
  }
}

/**
 * Turns a failure to read or write the self-signed pair into one line naming
 * where it is kept and the ways around it.
 */
export function explainSelfSignedError(error: unknown, dir: string, setting: string): StartupError {
  return new StartupError(
    `Cannot keep the self-signed certificate in ${setting} "${dir}": ${describeFsError(error)}; ` +
      "make the directory writable, choose another --self-signed-dir, or give --cert and --key",
    1,
  );
}

function statOrUndefined(path: string) {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/** A file-system error in a few words, for a one-line startup error. */
export function describeFsError(error: unknown): string {
  if (error instanceof Deno.errors.NotFound) return "no such file or directory";
  if (error instanceof Deno.errors.PermissionDenied) return "permission denied";
  if (error instanceof Deno.errors.IsADirectory) return "it is a directory";
  if (error instanceof Deno.errors.NotADirectory) return "a part of the path is not a directory";
  const message = toErrorText(error);
  // mkdir -p over a regular file fails with EEXIST.
  if (/ENOTDIR|EEXIST|not a directory/i.test(message)) {
    return "a part of the path is not a directory";
  }
  if (/EACCES|permission denied/i.test(message)) return "permission denied";
  if (/EISDIR|is a directory/i.test(message)) return "it is a directory";
  return message.replace(/\s+/g, " ").trim();
}
