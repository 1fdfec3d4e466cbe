/**
 * Reading `--portal-secret-file` (docs/portal.md): the key of the portal's one-time code
 * digests (HMAC-SHA-256, src/auth/portal/codes.ts) and of the throttle counters' e-mail digests
 * (src/auth/portal/portal_throttle.ts). Kept outside the database, so that a database reader can
 * neither try codes offline nor test a guessed address against the counters; every instance reads the same file, at start and
 * in each request worker. The file's bytes are the key, as they are; never logged.
 *
 * @module
 */
import { describeFsError } from "./preflight.ts";
import { StartupError } from "./errors.ts";

/** The fewest bytes a key may have: 256 bits. */
export const MIN_PORTAL_SECRET_BYTES = 32;

/**
 * The key in `path`.
 * @throws {StartupError} exit 1 when the file cannot be read, 2 when it is too short.
 */
export function readPortalSecretFile(path: string): Uint8Array {
  let key: Uint8Array;
  try {
    key = Deno.readFileSync(path);
  } catch (error) {
    throw new StartupError(
      `Cannot read --portal-secret-file "${path}": ${describeFsError(error)}; ` +
        "make it readable by the user keygate runs as",
      1,
    );
  }
  if (key.length < MIN_PORTAL_SECRET_BYTES) {
    throw new StartupError(
      `--portal-secret-file "${path}" holds ${key.length} bytes; it needs at least ` +
        `${MIN_PORTAL_SECRET_BYTES} random bytes (openssl rand -out FILE 32)`,
      2,
    );
  }
  return key;
}
