/**
 * Settings of the developer portal (docs/portal.md; the parsers and the
 * `PortalConfig` part of the configuration are in ../portal_settings.ts).
 * Each row is placed in the `--help` order by `SETTINGS` in ../settings.ts.
 *
 * @module
 */
import { type Setting, setting } from "../setting.ts";
import { parseBoolean, parseHttpsOrigin } from "../parsers.ts";
import {
  parseDomains,
  parseMailFrom,
  parsePortalMode,
  parseSecretFilePath,
  parseSmtpUrl,
  parseUnverifiedTtl,
} from "../portal_settings.ts";

/** The developer portal's group (docs/portal.md, src/config/portal_settings.ts). */
export const PORTAL_SETTINGS: readonly Setting[] = [
  setting({
    key: "portal",
    flag: "portal",
    env: "KEYGATE_PORTAL",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Serve the developer portal (/portal/, /api/portal/v1/) on the API listener; " +
      "needs --smtp-url, --mail-from and --portal-origin",
  }),
  setting({
    key: "portalMode",
    flag: "portal-mode",
    env: "KEYGATE_PORTAL_MODE",
    default: "open",
    parse: parsePortalMode,
    placeholder: "open|domains|approval|invite",
    description: "Who may open an account: anyone, --portal-domains only, anyone once an " +
      "operator approves, or only whom an operator invites",
  }),
  setting({
    key: "portalDomains",
    flag: "portal-domains",
    env: "KEYGATE_PORTAL_DOMAINS",
    parse: parseDomains,
    placeholder: "DOMAIN,…",
    description: "With --portal-mode domains: the e-mail domains that may sign up",
  }),
  setting({
    key: "portalExistingUsers",
    flag: "portal-existing-users",
    env: "KEYGATE_PORTAL_EXISTING_USERS",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Let users an operator added sign in to the portal and reset their password " +
      "there without being enrolled (deno task admin portal enrol EMAIL)",
  }),
  setting({
    key: "portalSecretFile",
    flag: "portal-secret-file",
    env: "KEYGATE_PORTAL_SECRET_FILE",
    parse: parseSecretFilePath,
    placeholder: "PATH",
    description: "A file of at least 32 random bytes, the same on every instance, that keys the " +
      "portal's one-time code digests (HMAC-SHA-256), so a database reader cannot try codes; " +
      "required with --portal on",
  }),
  setting({
    key: "smtpUrl",
    flag: "smtp-url",
    env: "KEYGATE_SMTP_URL",
    parse: parseSmtpUrl,
    placeholder: "URL",
    description: "The portal's mail server: smtp://[USER:PASSWORD@]HOST[:PORT] (STARTTLS " +
      "required) or smtps://… (TLS)",
  }),
  setting({
    key: "mailFrom",
    flag: "mail-from",
    env: "KEYGATE_MAIL_FROM",
    parse: parseMailFrom,
    placeholder: "ADDRESS",
    description: "The From address of the portal's mail",
  }),
  setting({
    key: "portalOrigin",
    flag: "portal-origin",
    env: "KEYGATE_PORTAL_ORIGIN",
    parse: parseHttpsOrigin,
    placeholder: "URL",
    description: "The portal's public origin (https://HOST[:PORT]): links in mail, and the " +
      "only Origin its changes accept; required with --portal on",
  }),
  setting({
    key: "portalUnverifiedTtlSeconds",
    flag: "portal-unverified-ttl",
    env: "KEYGATE_PORTAL_UNVERIFIED_TTL",
    default: "7d",
    parse: parseUnverifiedTtl,
    placeholder: "DURATION",
    description: "How long a portal sign-up may stay unverified before the janitor deletes it: " +
      "off or at least 1d",
  }),
];
