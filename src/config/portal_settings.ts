/**
 * The developer portal's settings (docs/portal.md), one group of the settings table
 * (settings.ts spreads {@link PORTAL_SETTINGS} into `SETTINGS`), and their parsers. The SMTP
 * URL may hold a password: every message shows it redacted (`redactCredentials`).
 *
 * @module
 */
import { parseDuration } from "../platform/duration.ts";

/** Who may open an account on the portal. */
export type PortalMode = "open" | "domains" | "approval" | "invite";

/** The portal's part of `Config`. */
export interface PortalConfig {
  /** Serve the portal's pages and JSON API on the public listener. */
  portal: boolean;
  portalMode: PortalMode;
  /** `domains` mode: the e-mail domains that may sign up (lower case). */
  portalDomains?: string[];
  /** Whether users an operator added may use the portal without being enrolled. */
  portalExistingUsers: boolean;
  /** The file whose bytes key the one-time codes' digests (read at start, never logged). */
  portalSecretFile?: string;
  /** `smtp://` (STARTTLS required) or `smtps://`, with credentials; log only its redacted form. */
  smtpUrl?: string;
  /** The From address of the portal's mail. */
  mailFrom?: string;
  /** The origin the portal's links in mail point to (`https://keys.example.org`). */
  portalOrigin?: string;
  /** Sign-ups still unverified this long after they were made are deleted; 0: never. */
  portalUnverifiedTtlSeconds: number;
}

/** The shortest `--portal-unverified-ttl`: a day, as long as a verification code works. */
export const MIN_UNVERIFIED_TTL_SECONDS = 86_400;

/**
 * Parses `--portal-unverified-ttl`: `off` (0) or a duration of at least a day, so that a
 * sign-up is never deleted while its code still works (nor `7m` typed for `7d` obeyed).
 */
export function parseUnverifiedTtl(text: string): number {
  if (text.trim().toLowerCase() === "off") return 0;
  let seconds: number;
  try {
    seconds = parseDuration(text.trim());
  } catch {
    seconds = 0;
  }
  if (seconds < MIN_UNVERIFIED_TTL_SECONDS) {
    throw new SyntaxError('expected off or a duration of 1d or more, like "7d"');
  }
  return seconds;
}

const MODES: readonly PortalMode[] = ["open", "domains", "approval", "invite"];

/** Parses `--portal-secret-file`: a path, not empty. */
export function parseSecretFilePath(text: string): string {
  if (text.trim() === "") throw new SyntaxError("expected the path of a file");
  return text;
}

/** Parses `--portal-mode`. */
export function parsePortalMode(text: string): PortalMode {
  const mode = MODES.find((m) => m === text.toLowerCase());
  if (mode === undefined) throw new SyntaxError(`expected one of ${MODES.join(", ")}`);
  return mode;
}

/** Parses `--portal-domains`: comma-separated domain names, lower-cased. */
export function parseDomains(text: string): string[] {
  const domains = text.split(",").map((d) => d.trim().toLowerCase()).filter((d) => d !== "");
  for (const domain of domains) {
    if (
      !/^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/
        .test(domain)
    ) {
      throw new SyntaxError(
        `expected domain names such as example.org, got "${domain.slice(0, 64)}"`,
      );
    }
  }
  if (domains.length === 0) throw new SyntaxError("expected at least one domain");
  return domains;
}

/** Parses `--smtp-url`: `smtp://` or `smtps://`, a host, an optional port and credentials. */
export function parseSmtpUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new SyntaxError("expected smtp://[USER:PASSWORD@]HOST[:PORT] or smtps://…");
  }
  if (url.protocol !== "smtp:" && url.protocol !== "smtps:") {
    throw new SyntaxError("expected the scheme smtp:// (STARTTLS) or smtps:// (TLS)");
  }
  if (url.hostname === "") throw new SyntaxError("expected a host name");
  if (url.pathname !== "" && url.pathname !== "/") throw new SyntaxError("expected no path");
  try {
    // The mailer decodes them: a bad escape (`%ZZ`) is a mistake of the setting, found here.
    decodeURIComponent(url.username);
    decodeURIComponent(url.password);
  } catch {
    throw new SyntaxError("expected the user and password percent-encoded (%XX): a % is %25");
  }
  return text;
}

/** What an address in `--mail-from` may not hold: spaces, brackets, quotes, separators, controls. */
// deno-lint-ignore no-control-regex
const NOT_IN_ADDRESS = /[\s<>"\x00-\x1f\x7f,;]/;

/** Parses `--mail-from`: one address. */
export function parseMailFrom(text: string): string {
  const at = text.lastIndexOf("@");
  if (at < 1 || at === text.length - 1 || NOT_IN_ADDRESS.test(text) || text.length > 254) {
    throw new SyntaxError("expected one e-mail address such as keys@example.org");
  }
  return text;
}
