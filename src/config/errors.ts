/**
 * The two ways a start fails before the server answers: a setting that is
 * wrong in itself ({@link ConfigError}, exit 2) and a setting the system
 * refuses ({@link StartupError}, exit 1 or 2). main prints the message as one
 * line and exits with the code.
 *
 * @module
 */

/** A flag or variable that cannot be used; exit 2. */
export class ConfigError extends Error {
  override name = "ConfigError";
  readonly exitCode = 2;
}

/**
 * A well-formed setting that does not work here: a missing or unusable file
 * (exit 2: fix the setting) or a port in use or unwritable path (exit 1: fix
 * the environment). The message names the flag, the value and what to do.
 */
export class StartupError extends Error {
  override name = "StartupError";
  constructor(message: string, readonly exitCode: 1 | 2) {
    super(message);
  }
}
