/** readConfig(): the admin listener, the store URL and its options, and checks across settings. */
import assert from "node:assert/strict";
import { ConfigError } from "../../src/config/errors.ts";
import { formatHelp } from "../../src/config/help.ts";
import { readConfig } from "../../src/config/read_config.ts";
import type { Config } from "../../src/config/settings.ts";

function read(args: string[], env: Record<string, string> = {}): Config {
  const config = readConfig(args, env);
  assert.equal(typeof config, "object");
  return config as Config;
}

Deno.test("readConfig() reads --admin, --admin-hostname and --admin-port, never the API's port", () => {
  const config = read(["--admin", "on", "--admin-port", "9555"], {
    KEYGATE_ADMIN_HOSTNAME: "10.0.0.5",
  });
  assert.equal(config.admin, true);
  assert.equal(config.adminPort, 9555);
  assert.equal(config.adminHostname, "10.0.0.5");
  assert.throws(
    () => readConfig(["--admin", "on", "--admin-port", "8443"], {}),
    new ConfigError(
      'Invalid --admin-port "8443": the admin listener never shares the public or the metrics ' +
        "port (--admin-port is on the command line; --port is its default)",
    ),
  );
  assert.throws(
    () => readConfig(["--admin", "on", "--metrics", "on", "--admin-port", "9464"], {}),
    ConfigError,
  );
  assert.equal(read(["--admin-port", "8443"]).admin, false, "no listener, no clash");
  assert.throws(() => readConfig(["--admin", "maybe"], {}), ConfigError);
  assert.throws(() => readConfig(["--admin-port", "70000"], {}), ConfigError);
  assert.match(formatHelp(), /--admin \[on\|off\]/);
});

Deno.test("readConfig() reads --store and KEYGATE_STORE; --db and --store together are a usage error", () => {
  const url = "postgres://kg:hunter2@db.internal/keygate?sslmode=verify-full";
  const config = read(["--store", url, "--store-staleness", "5s"]);
  assert.equal(config.store, url);
  assert.equal(config.storeStalenessSeconds, 5);
  assert.equal(read([], { KEYGATE_STORE: "sqlite:/var/lib/k.db" }).store, "sqlite:/var/lib/k.db");
  // Wherever each came from, and saying where: a flag does not beat another setting's variable.
  for (
    const [args, env, where] of [
      [
        ["--store", url, "--db", "k.sqlite3"],
        {},
        "--store is on the command line; --db is on the command line",
      ],
      [
        ["--store", url],
        { KEYGATE_DB: "k.sqlite3" },
        "--store is on the command line; KEYGATE_DB is set in the environment",
      ],
      [
        ["--db", "k.sqlite3"],
        { KEYGATE_STORE: url },
        "KEYGATE_STORE is set in the environment; --db is on the command line",
      ],
      [
        [],
        { KEYGATE_STORE: url, KEYGATE_DB: "k.sqlite3" },
        "KEYGATE_STORE is set in the environment; KEYGATE_DB is set in the environment",
      ],
    ] as [string[], Record<string, string>, string][]
  ) {
    assert.throws(
      () => readConfig(args, env),
      new ConfigError(`Invalid store settings: give --store or --db, not both (${where})`),
    );
  }
  // An empty variable counts as unset: KEYGATE_STORE= beside --db is no conflict.
  assert.equal(read(["--db", "k.sqlite3"], { KEYGATE_STORE: "" }).dbPath, "k.sqlite3");
  // The systemd recipe: KEYGATE_STORE from an EnvironmentFile, an ExecStart without --db.
  assert.equal(read(["--behind-proxy", "on", "--port", "8080"], { KEYGATE_STORE: url }).store, url);
  for (
    const [value, message] of [
      ["postgres://kg:hunter2@db/keygate?sslmode=prefer", /sslmode "prefer" is not one of/],
      ["mysql://kg:hunter2@db/keygate", /expected postgres:\/\//],
    ] as const
  ) {
    assert.throws(
      () => readConfig(["--store", value], {}),
      (error: Error) =>
        error instanceof ConfigError && message.test(error.message) &&
        !error.message.includes("hunter2"),
    );
  }
  assert.throws(() => readConfig(["--store-staleness", "0s"], {}), ConfigError);
  assert.throws(() => readConfig(["--store-staleness", "10000000d"], {}), ConfigError);
  assert.equal(read(["--store", url, "--store-staleness", "5m"]).storeStalenessSeconds, 300);
  assert.ok(!formatHelp().includes("hunter2"));
});

Deno.test("readConfig() reads --store-listen and --grant-cache-size, 0 meaning no cache", () => {
  assert.equal(read(["--store-listen", "off"]).storeListen, false);
  assert.equal(read(["--store-listen"]).storeListen, true);
  assert.equal(read([], { KEYGATE_STORE_LISTEN: "off" }).storeListen, false);
  assert.throws(() => readConfig(["--store-listen", "sometimes"], {}), ConfigError);
  assert.equal(read(["--grant-cache-size", "0"]).grantCacheSize, 0);
  assert.equal(read([], { KEYGATE_GRANT_CACHE_SIZE: "2500" }).grantCacheSize, 2500);
  for (const bad of ["-1", "1e5", "lots", "10000001", ""]) {
    assert.throws(
      () => readConfig(["--grant-cache-size", bad], {}),
      (error: Error) =>
        error instanceof ConfigError && /0 \(no cache\) to 10000000/.test(error.message),
      bad,
    );
  }
  assert.match(formatHelp(), /--store-listen \[on\|off\]/);
  assert.match(formatHelp(), /--grant-cache-size N/);
});

Deno.test("readConfig(): every check of settings together says where each came from (issue 29)", () => {
  const cases: [string[], Record<string, string>, string][] = [
    [
      ["--cert", "c.pem"],
      {},
      "Invalid TLS settings: --cert and --key go together (only --cert is set, on the command line)",
    ],
    [
      [],
      { KEYGATE_TLS_KEY: "k.pem" },
      "Invalid TLS settings: --cert and --key go together " +
      "(only --key is set, by KEYGATE_TLS_KEY in the environment)",
    ],
    [
      ["--cert", "c.pem"],
      { KEYGATE_TLS_KEY: "k.pem", KEYGATE_BEHIND_PROXY: "on" },
      "Invalid TLS settings: --cert and --key do not apply with --behind-proxy " +
      "(KEYGATE_BEHIND_PROXY is set in the environment; --cert is on the command line)",
    ],
    [
      ["--cert", "c.pem", "--key", "k.pem"],
      { KEYGATE_SELF_SIGNED_DIR: "/var/lib/keygate" },
      "Invalid TLS settings: --self-signed-dir applies only without --cert and --key " +
      "(KEYGATE_SELF_SIGNED_DIR is set in the environment; --cert is on the command line)",
    ],
    [
      ["--metrics"],
      { KEYGATE_METRICS_PORT: "8443" },
      'Invalid --metrics-port "8443": metrics are never served on the public port ' +
      "(KEYGATE_METRICS_PORT is set in the environment; --port is its default)",
    ],
    [
      ["--admin", "--port", "9000"],
      { KEYGATE_ADMIN_PORT: "9000" },
      'Invalid --admin-port "9000": the admin listener never shares the public or the metrics ' +
      "port (KEYGATE_ADMIN_PORT is set in the environment; --port is on the command line)",
    ],
    [
      ["--behind-proxy"],
      { KEYGATE_HOSTNAME: "0.0.0.0" },
      'Invalid --hostname "0.0.0.0" with --behind-proxy: plain HTTP is served only on a ' +
      "loopback or private address (KEYGATE_HOSTNAME is set in the environment; " +
      "--behind-proxy is on the command line)",
    ],
    [
      ["--behind-proxy", "--trusted-proxies", " , "],
      {},
      "Invalid --trusted-proxies: --behind-proxy needs at least one range " +
      "(--trusted-proxies is on the command line, and empty)",
    ],
  ];
  for (const [args, env, message] of cases) {
    assert.throws(() => readConfig(args, env), new ConfigError(message));
  }
});

Deno.test("readConfig(): --db is a file path; a URL there is refused without its password", () => {
  for (
    const [args, env, message] of [
      [
        ["--db", "postgres://kg:hunter2@db/keygate"],
        {},
        'Invalid --db "postgres://kg:***@db/keygate": it is a store URL: give it with --store ' +
        "(--db takes a file path)",
      ],
      [
        [],
        { KEYGATE_DB: "postgres//kg:hunter2@db/keygate" },
        'Invalid KEYGATE_DB "postgres//kg:***@db/keygate": it looks like a postgres:// URL ' +
        'with its ":" missing; --db takes a file path (a URL goes in --store)',
      ],
      [
        ["--store", "postgres//kg:hunter2@127.0.0.1:55432/keygate"],
        {},
        'Invalid --store "postgres//kg:***@127.0.0.1:55432/keygate": it looks like a ' +
        'postgres:// URL with its ":" missing; expected ' +
        "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, sqlite:PATH or a file path",
      ],
    ] as [string[], Record<string, string>, string][]
  ) {
    assert.throws(() => readConfig(args, env), new ConfigError(message));
  }
});

Deno.test("readConfig(): a password in a mistyped flag or a stray argument is not echoed", () => {
  for (
    const [args, message] of [
      [["--stor=postgres://kg:hunter2@db/k"], 'Unknown option "--stor=postgres://kg:***@db/k"'],
      [["postgres://kg:hunter2@db/k"], 'Unexpected argument "postgres://kg:***@db/k"'],
      [["--upstream", "http://u:hunter2@x.example"], /^Invalid --upstream "http:\/\/u:\*\*\*@/],
    ] as [string[], string | RegExp][]
  ) {
    assert.throws(() => readConfig(args, {}), (error: Error) => {
      assert.ok(error instanceof ConfigError);
      if (typeof message === "string") assert.equal(error.message, message);
      else assert.match(error.message, message);
      assert.doesNotMatch(error.message, /hunter2/);
      return true;
    });
  }
});
