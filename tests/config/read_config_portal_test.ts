/** readConfig(): the developer portal's settings (mail, origin, modes, sign-ups' lifetime). */
import assert from "node:assert/strict";
import { ConfigError } from "../../src/config/errors.ts";
import { readConfig } from "../../src/config/read_config.ts";
import type { Config } from "../../src/config/settings.ts";

function read(args: string[], env: Record<string, string> = {}): Config {
  const config = readConfig(args, env);
  assert.equal(typeof config, "object");
  return config as Config;
}

Deno.test("readConfig() reads --portal-unverified-ttl as off or at least a day", () => {
  assert.equal(read([]).portalUnverifiedTtlSeconds, 7 * 86400);
  assert.equal(read(["--portal-unverified-ttl", "off"]).portalUnverifiedTtlSeconds, 0);
  assert.equal(read(["--portal-unverified-ttl", "30d"]).portalUnverifiedTtlSeconds, 30 * 86400);
  assert.equal(
    read([], { KEYGATE_PORTAL_UNVERIFIED_TTL: "24h" }).portalUnverifiedTtlSeconds,
    86400,
  );
  // 7m for 7d would delete sign-ups whose codes still work: refused.
  for (const value of ["7m", "23h", "0", "never", ""]) {
    assert.throws(
      () => read(["--portal-unverified-ttl", value]),
      /portal-unverified-ttl.*expected off or a duration of 1d or more/,
      value,
    );
  }
});

Deno.test("readConfig() checks the portal's settings and never shows the SMTP password", () => {
  assert.throws(
    () => readConfig(["--portal", "on"], {}),
    new ConfigError(
      "Invalid portal settings: --portal on needs --smtp-url and --mail-from " +
        "(--portal is on the command line)",
    ),
  );
  // Mail links never come from the request's Host, which a client chooses.
  assert.throws(
    () =>
      readConfig(["--portal", "on"], {
        KEYGATE_SMTP_URL: "smtp://mail.test",
        KEYGATE_MAIL_FROM: "keys@example.org",
      }),
    new ConfigError(
      "Invalid portal settings: --portal on needs --portal-origin, the origin its mail links " +
        "point to (--portal is on the command line)",
    ),
  );
  // Codes' digests are keyed: never plain SHA-256 a database reader could try offline.
  assert.throws(
    () =>
      readConfig(["--portal", "on"], {
        KEYGATE_SMTP_URL: "smtp://mail.test",
        KEYGATE_MAIL_FROM: "keys@example.org",
        KEYGATE_PORTAL_ORIGIN: "https://keys.example.org",
      }),
    new ConfigError(
      "Invalid portal settings: --portal on needs --portal-secret-file, the key of its one-time " +
        "codes' digests (openssl rand -out FILE 32) (--portal is on the command line)",
    ),
  );
  assert.throws(
    () => readConfig(["--portal-mode", "domains"], {}),
    /--portal-mode domains needs --portal-domains/,
  );
  assert.throws(
    () => readConfig(["--smtp-url", "http://u:hunter2@mail.test"], {}),
    (error: Error) => error instanceof ConfigError && !error.message.includes("hunter2"),
  );
  assert.throws(() => readConfig(["--portal-mode", "everyone"], {}), /expected one of open/);
  assert.throws(() => readConfig(["--mail-from", "a b@c"], {}), /expected one e-mail address/);
  const config = readConfig([
    "--portal",
    "--portal-mode",
    "domains",
    "--portal-domains",
    "Example.org, example.com",
    "--smtp-url",
    "smtps://u:p%40ss@mail.test:465",
    "--mail-from",
    "keys@example.org",
    "--portal-origin",
    "https://keys.example.org/",
    "--portal-secret-file",
    "/etc/keygate/portal.key",
  ], {}) as Config;
  assert.deepEqual(
    [config.portal, config.portalMode, config.portalDomains, config.portalOrigin],
    [true, "domains", ["example.org", "example.com"], "https://keys.example.org"],
  );
});
