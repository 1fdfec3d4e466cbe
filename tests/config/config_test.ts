import assert from "node:assert/strict";
import { parseArguments } from "../../src/config/args.ts";
import { ConfigError } from "../../src/config/errors.ts";
import { formatHelp } from "../../src/config/help.ts";
import { MAX_WORKERS, parseBoolean } from "../../src/config/parsers.ts";
import { readConfig } from "../../src/config/read_config.ts";
import { type Config, isBooleanSetting, SETTINGS } from "../../src/config/settings.ts";

function read(args: string[], env: Record<string, string> = {}): Config {
  const config = readConfig(args, env);
  assert.equal(typeof config, "object");
  return config as Config;
}

Deno.test("readConfig() uses the documented defaults", () => {
  assert.deepEqual(read([]), {
    hostname: "0.0.0.0",
    port: 8443,
    dbPath: "db/keygate.sqlite3",
    storeStalenessSeconds: 2,
    storeListen: true,
    grantCacheSize: 100_000,
    certReloadIntervalSeconds: 60,
    defaultTimeoutSeconds: 36000,
    corsOrigins: ["*"],
    logLevel: "info",
    upstreamTimeoutSeconds: 30,
    hideCredentials: true,
    limitHeaders: true,
    limitLeaseAhead: true,
    metrics: false,
    metricsHostname: "127.0.0.1",
    metricsPort: 9464,
    admin: false,
    adminHostname: "127.0.0.1",
    adminPort: 9444,
    behindProxy: false,
    trustedProxies: ["127.0.0.1/32", "::1/128"],
    forwardAuthHeader: "either",
    unicodePaths: false,
    tokenRetentionSeconds: 7 * 86400,
    auditRetentionSeconds: 0,
    shutdownTimeoutSeconds: 30,
    loginQueueWaitSeconds: 5,
    workers: 1,
    portal: false,
    portalExistingUsers: false,
    portalMode: "open",
    portalUnverifiedTtlSeconds: 7 * 86400,
  });
});

Deno.test("readConfig() reads --audit-retention as off or at least 30 days", () => {
  assert.equal(read([]).auditRetentionSeconds, 0);
  assert.equal(read(["--audit-retention", "off"]).auditRetentionSeconds, 0);
  assert.equal(read(["--audit-retention", "90d"]).auditRetentionSeconds, 90 * 86400);
  assert.equal(read(["--audit-retention", "30d"]).auditRetentionSeconds, 30 * 86400);
  // 30m for 30d would empty the log of all but its last half hour: refused.
  for (const value of ["30m", "29d", "0", "forever", ""]) {
    assert.throws(() => read(["--audit-retention", value]), /audit-retention/, value);
  }
});

Deno.test("readConfig() reads --cert-reload-interval as a duration or 0 (off)", () => {
  assert.equal(read(["--cert-reload-interval", "5s"]).certReloadIntervalSeconds, 5);
  assert.equal(read([], { KEYGATE_CERT_RELOAD_INTERVAL: "0" }).certReloadIntervalSeconds, 0);
  assert.equal(read(["--cert-reload-interval", "off"]).certReloadIntervalSeconds, 0);
  assert.throws(
    () => read(["--cert-reload-interval", "-1"]),
    /--cert-reload-interval.*expected 0 \(off\) or a positive whole number/,
  );
});

Deno.test("readConfig() reads --login-queue-wait from 1s to a minute, and refuses anything else", () => {
  assert.equal(read(["--login-queue-wait", "10s"]).loginQueueWaitSeconds, 10);
  assert.equal(read([], { KEYGATE_LOGIN_QUEUE_WAIT: "1m" }).loginQueueWaitSeconds, 60);
  for (const bad of ["0s", "61s", "2m", "5", "five", ""]) {
    assert.throws(
      () => readConfig([`--login-queue-wait=${bad}`], {}),
      (error: Error) =>
        error instanceof ConfigError &&
        error.message ===
          `Invalid --login-queue-wait "${bad}": expected a duration from 1s to 60s, like "5s"`,
      bad,
    );
  }
});

Deno.test("readConfig() reads --workers as a count or auto, and refuses anything else", () => {
  assert.equal(read(["--workers", "2"]).workers, 2);
  assert.equal(read([], { KEYGATE_WORKERS: "3" }).workers, 3);
  assert.equal(
    read(["--workers", "auto"]).workers,
    Math.min(MAX_WORKERS, navigator.hardwareConcurrency),
  );
  for (const bad of ["0", "-1", "1.5", "two", "", `${MAX_WORKERS + 1}`]) {
    assert.throws(
      () => readConfig([`--workers=${bad}`], {}),
      (error: Error) =>
        error instanceof ConfigError &&
        error.message ===
          `Invalid --workers "${bad}": expected a whole number from 1 to ${MAX_WORKERS}, or "auto"`,
      bad,
    );
  }
});

Deno.test("readConfig() reads --forward-auth-header and --unicode-paths", () => {
  const config = read(["--forward-auth-header", "X-Forwarded-Uri"], {
    KEYGATE_UNICODE_PATHS: "on",
  });
  assert.equal(config.forwardAuthHeader, "x-forwarded-uri");
  assert.equal(config.unicodePaths, true);
  assert.equal(
    read([], { KEYGATE_FORWARD_AUTH_HEADER: "x-original-uri" }).forwardAuthHeader,
    "x-original-uri",
  );
  assert.throws(
    () => readConfig(["--forward-auth-header", "x-real-uri"], {}),
    (error: Error) =>
      error instanceof ConfigError &&
      error.message ===
        'Invalid --forward-auth-header "x-real-uri": expected x-original-uri, x-forwarded-uri or either',
  );
  assert.throws(() => readConfig(["--unicode-paths", "maybe"], {}), ConfigError);
});

Deno.test("readConfig() reads --issuer as an https origin and refuses anything else", () => {
  assert.equal(read([]).issuer, undefined);
  assert.equal(read(["--issuer", "https://keys.example.org/"]).issuer, "https://keys.example.org");
  assert.equal(
    read([], { KEYGATE_ISSUER: "https://keys.example.org:8443" }).issuer,
    "https://keys.example.org:8443",
  );
  for (const bad of ["http://keys.example.org", "https://keys.example.org/oauth", "keys", ""]) {
    assert.throws(
      () => readConfig(["--issuer", bad], {}),
      (error: Error) =>
        error instanceof ConfigError && error.message.startsWith(`Invalid --issuer "${bad}": `),
      bad,
    );
  }
});

Deno.test("readConfig() prefers flags over KEYGATE_* variables", () => {
  const config = read(["--port", "9000", "--default-timeout=15m"], {
    KEYGATE_PORT: "8000",
    KEYGATE_DB: "/var/lib/keygate/k.sqlite3",
    KEYGATE_DEFAULT_TIMEOUT: "1h",
    KEYGATE_CORS_ORIGINS: "https://a.example, https://b.example",
  });
  assert.equal(config.port, 9000);
  assert.equal(config.dbPath, "/var/lib/keygate/k.sqlite3");
  assert.equal(config.defaultTimeoutSeconds, 900);
  assert.deepEqual(config.corsOrigins, ["https://a.example", "https://b.example"]);
});

Deno.test("readConfig() answers help for --help and -h, and version for --version", () => {
  assert.equal(readConfig(["--help"], {}), "help");
  assert.equal(readConfig(["-h"], {}), "help");
  assert.equal(readConfig(["--version"], {}), "version");
});

Deno.test("readConfig() ignores one leading -- (deno task start -- --port 0)", () => {
  assert.equal(read(["--", "--port", "0"]).port, 0);
});

Deno.test("parseBoolean() takes on/off/true/false/1/0 in any case and nothing else", () => {
  for (const word of ["on", "ON", "true", "True", "1"]) assert.equal(parseBoolean(word), true);
  for (const word of ["off", "Off", "false", "FALSE", "0"]) assert.equal(parseBoolean(word), false);
  for (const word of ["yes", "no", "", "2", "onn"]) {
    assert.throws(() => parseBoolean(word), SyntaxError);
  }
});

Deno.test("readConfig() reads every boolean setting the same way: bare, words, env", () => {
  const booleans = SETTINGS.filter(isBooleanSetting);
  assert.deepEqual(booleans.map((s) => s.flag), [
    "store-listen",
    "hide-credentials",
    "limit-headers",
    "limit-lease-ahead",
    "metrics",
    "admin",
    "behind-proxy",
    "unicode-paths",
    "portal",
    "portal-existing-users",
  ]);
  for (const setting of booleans) {
    const key = setting.key as "metrics";
    // --portal on needs its mail settings.
    const mail = setting.flag === "portal"
      ? {
        KEYGATE_SMTP_URL: "smtp://mail.test",
        KEYGATE_MAIL_FROM: "keys@example.org",
        KEYGATE_PORTAL_ORIGIN: "https://keys.example.org",
        KEYGATE_PORTAL_SECRET_FILE: "/etc/keygate/portal.key",
      }
      : {};
    const read = (args: string[], env: Record<string, string> = {}) =>
      readConfig(args, { ...mail, ...env }) as Config;
    assert.equal(read([`--${setting.flag}`])[key], true, `bare --${setting.flag}`);
    for (const [word, value] of [["on", true], ["off", false], ["true", true], ["0", false]]) {
      assert.equal(
        read([`--${setting.flag}`, String(word)])[key],
        value,
        `${setting.flag} ${word}`,
      );
      assert.equal(read([`--${setting.flag}=${word}`])[key], value);
      assert.equal(read([], { [setting.env]: String(word) })[key], value, setting.env);
    }
  }
});

Deno.test("readConfig() errors name the source: the flag or the environment variable", () => {
  assert.throws(
    () => readConfig([], { KEYGATE_METRICS: "yes" }),
    new ConfigError('Invalid KEYGATE_METRICS "yes": expected on, off, true, false, 1 or 0'),
  );
  assert.throws(
    () => readConfig(["--metrics=yes"], {}),
    new ConfigError('Invalid --metrics "yes": expected on, off, true, false, 1 or 0'),
  );
  assert.throws(
    () => readConfig([], { KEYGATE_PORT: "http" }),
    new ConfigError('Invalid KEYGATE_PORT "http": expected a whole number from 0 to 65535'),
  );
});

Deno.test("readConfig() refuses bad values with a ConfigError", () => {
  const bad: [string[], RegExp][] = [
    [["--port", "70000"], /^Invalid --port "70000": expected a whole number/],
    [["--port", "x"], /^Invalid --port "x"/],
    [["--port"], /^Option --port needs a value$/],
    [["--port", "1", "--port", "2"], /^Option --port is given more than once$/],
    [
      ["--cert", "a.pem"],
      /--cert and --key go together \(only --cert is set, on the command line\)/,
    ],
    [["--default-timeout", "10"], /^Invalid --default-timeout "10": expected a positive/],
    [["--cors-origins", "example.org"], /^Invalid --cors-origins "example.org": entry/],
    [["--log-level", "loud"], /^Invalid --log-level "loud": expected debug, info/],
    [["--upstream", "ftp://x.example"], /^Invalid --upstream "ftp:\/\/x.example"/],
    [["--upstream", "http://u:p@x.example"], /^Invalid --upstream/],
    [["--upstream", "http://x.example/?a=1"], /^Invalid --upstream/],
    [["--upstream", "not a url"], /^Invalid --upstream/],
    [["--upstream-timeout", "0s"], /^Invalid --upstream-timeout "0s"/],
    [["--hide-credentials", "yes"], /^Unexpected argument "yes"$/],
    [["--hide-credentials=yes"], /^Invalid --hide-credentials "yes": expected on, off/],
    [["--nope"], /^Unknown option "--nope"$/],
    [["-x"], /^Unknown option "-x"$/],
    [["stray"], /^Unexpected argument "stray"$/],
    [["--metrics", "--metrics-port", "8443"], /metrics are never served on the public port/],
  ];
  for (const [args, message] of bad) {
    assert.throws(() => readConfig(args, {}), (error: Error) => {
      assert.ok(error instanceof ConfigError, args.join(" "));
      assert.match(error.message, message, args.join(" "));
      return true;
    });
  }
});

Deno.test("parseArguments() keeps a boolean's next word when positionals are allowed", () => {
  const specs = [{ name: "json", kind: "boolean" as const }];
  assert.deepEqual(parseArguments(["--json", "off"], specs, { positionals: true }), {
    values: { json: "on" },
    positionals: ["off"],
  });
  assert.deepEqual(parseArguments(["--", "a", "--", "--json"], specs, { positionals: true }), {
    values: {},
    positionals: ["a", "--json"],
  });
});

Deno.test("formatHelp() lists every flag with a typed placeholder, its variable and default", () => {
  const help = formatHelp();
  for (const setting of SETTINGS) {
    assert.ok(help.includes(`--${setting.flag} ${setting.placeholder}`), setting.flag);
    assert.ok(help.includes(`env ${setting.env}`), setting.env);
    if (setting.default !== undefined) {
      assert.ok(help.includes(`env ${setting.env}, default ${setting.default}`), setting.flag);
    }
  }
  assert.ok(help.includes("-h, --help"));
  assert.ok(help.includes("--version"));
  for (const line of help.split("\n")) assert.ok(line.length <= 100, line);
});

Deno.test("every setting's default parses, and the table has no duplicate flag or variable", () => {
  assert.equal(new Set(SETTINGS.map((s) => s.flag)).size, SETTINGS.length);
  assert.equal(new Set(SETTINGS.map((s) => s.env)).size, SETTINGS.length);
  assert.equal(new Set(SETTINGS.map((s) => s.key)).size, SETTINGS.length);
  for (const setting of SETTINGS) {
    assert.match(setting.env, /^KEYGATE_[A-Z_]+$/);
    if (setting.default !== undefined) setting.parse(setting.default);
  }
});

Deno.test("readConfig() reads the upstream settings from flags and KEYGATE_* variables", () => {
  const config = read(["--upstream-timeout", "5s"], {
    KEYGATE_UPSTREAM: "http://127.0.0.1:9000/base",
    KEYGATE_HIDE_CREDENTIALS: "false",
  });
  assert.equal(config.upstream, "http://127.0.0.1:9000/base");
  assert.equal(config.upstreamTimeoutSeconds, 5);
  assert.equal(config.hideCredentials, false);
});

Deno.test("docs/configuration.md lists every setting with its placeholder, variable and default", () => {
  const doc = Deno.readTextFileSync(new URL("../../docs/configuration.md", import.meta.url));
  const items = doc.split("\n- ").slice(1).map((item) => item.replace(/\s+/g, " "));
  for (const setting of SETTINGS) {
    const item = items.find((text) =>
      text.startsWith(`\`--${setting.flag} ${setting.placeholder}\` (\`${setting.env}\``)
    );
    assert.ok(item, `--${setting.flag} ${setting.placeholder} (${setting.env}) has an entry`);
    if (setting.default !== undefined) {
      assert.ok(item.includes(`default \`${setting.default}\``), `default of --${setting.flag}`);
    }
  }
  const entries = items.filter((text) => text.startsWith("`--"));
  assert.equal(entries.length, SETTINGS.length, "no entry for a setting that does not exist");
});
