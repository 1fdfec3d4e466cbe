import assert from "node:assert/strict";
import { ConfigError, formatHelp, MAX_WORKERS, readConfig, SETTINGS } from "../src/config.ts";

Deno.test("readConfig() uses the documented defaults", () => {
  assert.deepEqual(readConfig([], {}), {
    hostname: "0.0.0.0",
    port: 8443,
    dbPath: "db/keygate.sqlite3",
    certFile: undefined,
    keyFile: undefined,
    defaultTimeoutSeconds: 36000,
    corsOrigins: ["*"],
    logLevel: "info",
    upstream: undefined,
    upstreamTimeoutSeconds: 30,
    hideCredentials: true,
    metrics: false,
    metricsHostname: "127.0.0.1",
    metricsPort: 9464,
    behindProxy: false,
    trustedProxies: ["127.0.0.1/32", "::1/128"],
    forwardAuthHeader: "either",
    unicodePaths: false,
    tokenRetentionSeconds: 7 * 86400,
    shutdownTimeoutSeconds: 30,
    workers: 1,
  });
});

Deno.test("readConfig() reads --workers as a count or auto, and refuses anything else", () => {
  assert.equal(readConfig(["--workers", "2"], {})!.workers, 2);
  assert.equal(readConfig([], { KEYGATE_WORKERS: "3" })!.workers, 3);
  assert.equal(
    readConfig(["--workers", "auto"], {})!.workers,
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
  const config = readConfig(["--forward-auth-header", "X-Forwarded-Uri"], {
    KEYGATE_UNICODE_PATHS: "on",
  })!;
  assert.equal(config.forwardAuthHeader, "x-forwarded-uri");
  assert.equal(config.unicodePaths, true);
  assert.equal(
    readConfig([], { KEYGATE_FORWARD_AUTH_HEADER: "x-original-uri" })!.forwardAuthHeader,
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

Deno.test("readConfig() prefers flags over KEYGATE_* variables", () => {
  const config = readConfig(["--port", "9000", "--default-timeout", "15m"], {
    KEYGATE_PORT: "8000",
    KEYGATE_DB: "/var/lib/keygate/k.sqlite3",
    KEYGATE_DEFAULT_TIMEOUT: "1h",
    KEYGATE_CORS_ORIGINS: "https://a.example, https://b.example",
  })!;
  assert.equal(config.port, 9000);
  assert.equal(config.dbPath, "/var/lib/keygate/k.sqlite3");
  assert.equal(config.defaultTimeoutSeconds, 900);
  assert.deepEqual(config.corsOrigins, ["https://a.example", "https://b.example"]);
});

Deno.test("readConfig() returns undefined for --help", () => {
  assert.equal(readConfig(["--help"], {}), undefined);
});

Deno.test("readConfig() refuses bad values with a ConfigError", () => {
  const bad: [string[], RegExp][] = [
    [["--port", "70000"], /Invalid port "70000"/],
    [["--port", "x"], /Invalid port/],
    [["--cert", "a.pem"], /--cert and --key go together/],
    [["--default-timeout", "10"], /Invalid --default-timeout/],
    [["--cors-origins", "example.org"], /Invalid --cors-origins entry "example.org"/],
    [["--log-level", "loud"], /Invalid --log-level "loud"/],
    [["--upstream", "ftp://x.example"], /Invalid --upstream "ftp:\/\/x.example"/],
    [["--upstream", "http://u:p@x.example"], /Invalid --upstream/],
    [["--upstream", "http://x.example/?a=1"], /Invalid --upstream/],
    [["--upstream", "not a url"], /Invalid --upstream/],
    [["--upstream-timeout", "0s"], /Invalid --upstream-timeout/],
    [["--hide-credentials", "yes"], /Invalid --hide-credentials "yes"/],
    [["--nope"], /nope/],
    [["stray"], /stray/],
  ];
  for (const [args, message] of bad) {
    assert.throws(() => readConfig(args, {}), (error: Error) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, message);
      return true;
    });
  }
});

Deno.test("formatHelp() lists every flag with its variable", () => {
  const help = formatHelp();
  for (const setting of SETTINGS) {
    assert.ok(help.includes(`--${setting.flag}`), setting.flag);
    assert.ok(help.includes(setting.env), setting.env);
  }
});

Deno.test("readConfig() reads the upstream settings from flags and KEYGATE_* variables", () => {
  const config = readConfig(["--upstream-timeout", "5s"], {
    KEYGATE_UPSTREAM: "http://127.0.0.1:9000/base",
    KEYGATE_HIDE_CREDENTIALS: "false",
  })!;
  assert.equal(config.upstream, "http://127.0.0.1:9000/base");
  assert.equal(config.upstreamTimeoutSeconds, 5);
  assert.equal(config.hideCredentials, false);
});

Deno.test("README's configuration table lists every setting with its variable and default", () => {
  const readme = Deno.readTextFileSync(new URL("../README.md", import.meta.url));
  const start = readme.indexOf("## Configuration");
  const table = readme.slice(start, readme.indexOf("\n\n", readme.indexOf("| flag", start)));
  for (const setting of SETTINGS) {
    const row = table.split("\n").find((line) => line.startsWith(`| \`--${setting.flag} `));
    assert.ok(row, `--${setting.flag} has a row`);
    assert.ok(row.includes(`\`${setting.env}\``), `${setting.env} in ${row}`);
    if (setting.default !== undefined) {
      assert.ok(row.includes(`\`${setting.default}\``), `default of --${setting.flag} in ${row}`);
    }
  }
  const rows = table.split("\n").filter((line) => line.startsWith("| `--"));
  assert.equal(rows.length, SETTINGS.length, "no row for a setting that does not exist");
});

Deno.test("formatHelp() prints every default", () => {
  const help = formatHelp();
  for (const setting of SETTINGS) {
    if (setting.default !== undefined) {
      assert.ok(help.includes(`(default: ${setting.default})`), setting.flag);
    }
  }
});
