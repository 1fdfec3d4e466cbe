/**
 * keygate's version, printed by `--version` (server and admin CLI) and kept
 * equal to the newest entry of CHANGELOG.md by a test.
 *
 * @module
 */

/** The released version, semantic versioning. */
export const VERSION = "0.24.0";
