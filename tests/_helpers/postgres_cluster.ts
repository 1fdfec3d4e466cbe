/**
 * A throwaway PostgreSQL cluster for tests: Debian's `initdb` and `pg_ctl` in
 * a temporary directory, on a free port of 127.0.0.1 with trust
 * authentication, its Unix socket inside that directory, fsync off. Never a
 * server someone else started. When running as root, the cluster runs as
 * the `postgres` OS user (PostgreSQL refuses root).
 *
 * A test file starts one cluster at module level (top-level await, so no
 * test is charged with its resources), takes a fresh database per test with
 * {@link PostgresCluster.createDatabase}, and registers
 * {@link PostgresCluster.stop} as its last test; an `unload` handler and a
 * watchdog that outlives a crashed test process remove it otherwise.
 *
 * Without the binaries, {@link POSTGRES_SKIP} says why and the PostgreSQL
 * tests are skipped, except in CI (`CI` set), where that is a failure:
 * `.ci/run` installs Debian's `postgresql` package.
 */
import postgres from "postgres";
import {
  IS_ROOT,
  postgresIds,
  run,
  runSync,
  startWatchdog,
  waitForPort,
  waitForSynchronousStandby,
} from "./postgres_processes.ts";
import { findFreePort } from "./free_port.ts";

/** A running throwaway cluster. */
export interface PostgresCluster {
  /** The TCP port on 127.0.0.1. */
  port: number;
  /** The directory holding the data directory, the socket and the log. */
  dir: string;
  /** Creates an empty database with a unique name and returns its `postgres://` URL. */
  createDatabase(prefix?: string): Promise<string>;
  /** The URL of an existing database. */
  urlOf(database: string): string;
  /** Stops the server (fast shutdown), keeping the data: for outage tests. */
  pause(): Promise<void>;
  /** Starts the server again on the same port after {@link pause}. */
  resume(): Promise<void>;
  /** Stops the server and deletes the directory. Idempotent. */
  stop(): Promise<void>;
  /** Kills the server as a crash would (`pg_ctl stop -m immediate`), keeping the data. */
  crash(): Promise<void>;
  /**
   * Starts a streaming standby of this server (`pg_basebackup -R`) on another free port. With
   * `synchronous`, this server then waits for it on every commit (`synchronous_standby_names`),
   * and the call returns once it does.
   */
  startStandby(options?: { synchronous?: boolean }): Promise<PostgresStandby>;
}

/** A streaming standby started by {@link PostgresCluster.startStandby}. */
export interface PostgresStandby {
  /** The TCP port on 127.0.0.1. */
  port: number;
  /** Promotes it to primary (`pg_ctl promote`), waiting until it accepts writes. */
  promote(): Promise<void>;
  /** Stops it and deletes its directory. Idempotent. */
  stop(): Promise<void>;
}

const BIN_NAMES = ["initdb", "pg_ctl", "postgres"] as const;

/** The directory holding `initdb`, `pg_ctl` and `postgres`, or `undefined`. */
export function findPostgresBin(): string | undefined {
  const dirs = (Deno.env.get("PATH") ?? "").split(":").filter((dir) => dir !== "");
  try {
    const versions = [...Deno.readDirSync("/usr/lib/postgresql")]
      .map((entry) => entry.name)
      .filter((name) => /^\d+$/.test(name))
      .sort((a, b) => Number(b) - Number(a));
    dirs.push(...versions.map((version) => `/usr/lib/postgresql/${version}/bin`));
  } catch {
    // No Debian PostgreSQL packages.
  }
  return dirs.find((dir) => BIN_NAMES.every((name) => isFile(`${dir}/${name}`)));
}

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

const IN_CI = (Deno.env.get("CI") ?? "") !== "" && Deno.env.get("CI") !== "false";

/**
 * Why the PostgreSQL tests are skipped, or `false` when they run. Throws in
 * CI when the binaries are missing, so that CI never passes by skipping.
 */
export const POSTGRES_SKIP: string | false = (() => {
  if (findPostgresBin() !== undefined) return false;
  const reason = "PostgreSQL binaries (initdb, pg_ctl, postgres) not found: " +
    "install Debian's postgresql package to run the PostgreSQL tests";
  if (IN_CI) throw new Error(`${reason} (required in CI)`);
  return reason;
})();

/** Options for {@link startPostgres}. */
export interface StartPostgresOptions {
  /** Outlives this test file: stopped only when the process ends (see {@link sharedPostgres}). */
  shared?: boolean;
  /** More directories the watchdog removes with the cluster's. */
  alsoRemove?: string[];
  /** The superuser's name (default `keygate`, which {@link PostgresCluster.urlOf} uses). */
  superuser?: string;
  /**
   * With a password, TCP connections need one (`scram-sha-256`, as a real
   * server asks) and the superuser has this one; the socket stays `trust`.
   */
  superuserPassword?: string;
}

/** Starts a new cluster. Throws when the binaries are missing. */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresCluster> {
  const bin = findPostgresBin();
  if (bin === undefined) throw new Error(POSTGRES_SKIP || "PostgreSQL binaries not found");
  const dir = await Deno.makeTempDir({ prefix: "keygate-pg-" });
  if (IS_ROOT) {
    const { uid, gid } = postgresIds();
    await Deno.chown(dir, uid, gid);
  }
  const data = `${dir}/data`;
  await initCluster(bin, dir, options);
  let port = 0;
  let stopped = false;
  await startWatchdog(bin, [dir, ...(options.alsoRemove ?? [])], data);

  /** pg_ctl start on `port`, waiting until the server accepts connections. */
  function startOnPort(): Promise<unknown> {
    return run(`${bin}/pg_ctl`, [
      "--pgdata",
      data,
      "--log",
      `${dir}/server.log`,
      "--wait",
      "--timeout",
      "30",
      "-o",
      `-p ${port}`,
      "start",
    ]);
  }

  async function start(): Promise<void> {
    for (let attempt = 1;; attempt++) {
      if (port === 0 || attempt > 1) port = findFreePort();
      try {
        await startOnPort();
        return;
      } catch (error) {
        // Another process may have taken the port between findFreePort() and the bind.
        if (attempt >= 3) throw error;
      }
    }
  }

  async function resumeOnSamePort(): Promise<void> {
    await startOnPort();
  }

  await start();
  let counter = 0;

  const cluster: PostgresCluster = {
    get port() {
      return port;
    },
    dir,
    urlOf: (database) => `postgres://keygate@127.0.0.1:${port}/${database}?sslmode=disable`,
    async createDatabase(prefix = "t") {
      const name = `${prefix}_${Deno.pid}_${++counter}`.toLowerCase().replace(/[^a-z0-9_]/g, "_");
      const sql = postgres(cluster.urlOf("postgres"), { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`CREATE DATABASE "${name}" TEMPLATE template0`);
      } finally {
        await sql.end();
      }
      return cluster.urlOf(name);
    },
    async pause() {
      await run(`${bin}/pg_ctl`, ["--pgdata", data, "--wait", "--mode", "fast", "stop"]);
    },
    resume: resumeOnSamePort,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        await run(`${bin}/pg_ctl`, ["--pgdata", data, "--wait", "--mode", "immediate", "stop"]);
      } catch {
        // Already stopped (a test paused it).
      }
      await Deno.remove(dir, { recursive: true });
    },
    async crash() {
      await run(`${bin}/pg_ctl`, ["--pgdata", data, "--wait", "--mode", "immediate", "stop"]);
    },
    startStandby: (standbyOptions = {}) =>
      startStandby(bin, port, standbyOptions.synchronous ?? false),
  };
  if (options.shared) return cluster;
  globalThis.addEventListener("unload", () => {
    if (stopped) return;
    stopped = true;
    runSync(`${bin}/pg_ctl`, ["--pgdata", data, "--mode", "immediate", "stop"]);
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch {
      // Best effort.
    }
  });
  return cluster;
}

/** initdb into `dir`/data, with the settings of a test server (its socket in `dir`). */
async function initCluster(bin: string, dir: string, options: StartPostgresOptions): Promise<void> {
  const data = `${dir}/data`;
  const auth = ["--auth", "trust"];
  if (options.superuserPassword !== undefined) {
    const pwfile = `${dir}/superuser-password`;
    await Deno.writeTextFile(pwfile, `${options.superuserPassword}\n`);
    if (IS_ROOT) await Deno.chown(pwfile, postgresIds().uid, postgresIds().gid);
    auth.push("--auth-host", "scram-sha-256", "--pwfile", pwfile);
  }
  await run(`${bin}/initdb`, [
    "--pgdata",
    data,
    "--no-sync",
    ...auth,
    "--username",
    options.superuser ?? "keygate",
    "--encoding",
    "UTF8",
    "--no-locale",
  ]);
  // Only 127.0.0.1 and the socket in `dir`: nothing outside this machine can connect.
  await Deno.writeTextFile(
    `${data}/postgresql.auto.conf`,
    [
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${dir}'`,
      // Test speed only: a crash may lose the cluster, which the tests delete anyway.
      "fsync = off",
      "full_page_writes = off",
      "max_connections = 200",
      "shared_buffers = '32MB'",
      "",
    ].join("\n"),
    { append: true },
  );
}

/** A streaming standby of the primary on `primaryPort`, started (see PostgresCluster.startStandby). */
async function startStandby(
  bin: string,
  primaryPort: number,
  synchronous: boolean,
): Promise<PostgresStandby> {
  const standbyDir = await Deno.makeTempDir({ prefix: "keygate-pg-standby-" });
  if (IS_ROOT) {
    const { uid, gid } = postgresIds();
    await Deno.chown(standbyDir, uid, gid);
  }
  const standbyData = `${standbyDir}/data`;
  await startWatchdog(bin, [standbyDir], standbyData);
  // Not always beside the pg_ctl found first (a link to it elsewhere): beside its target.
  const realBin = Deno.realPathSync(`${bin}/pg_ctl`).replace(/\/[^/]*$/, "");
  await run(`${realBin}/pg_basebackup`, [
    "--pgdata",
    standbyData,
    "--host",
    "127.0.0.1",
    "--port",
    String(primaryPort),
    "--username",
    "keygate",
    "--write-recovery-conf",
    "--wal-method",
    "stream",
    "--checkpoint",
    "fast",
    "--no-sync",
  ]);
  // The copied settings name the primary's socket directory: this one has its own.
  await Deno.writeTextFile(
    `${standbyData}/postgresql.auto.conf`,
    `unix_socket_directories = '${standbyDir}'\n`,
    { append: true },
  );
  const standbyPort = findFreePort();
  await run(`${bin}/pg_ctl`, [
    "--pgdata",
    standbyData,
    "--log",
    `${standbyDir}/server.log`,
    "--wait",
    "--timeout",
    "30",
    "-o",
    `-p ${standbyPort}`,
    "start",
  ]);
  let standbyStopped = false;
  const standby: PostgresStandby = {
    port: standbyPort,
    async promote() {
      await run(`${bin}/pg_ctl`, ["--pgdata", standbyData, "--wait", "promote"]);
    },
    async stop() {
      if (standbyStopped) return;
      standbyStopped = true;
      try {
        await run(`${bin}/pg_ctl`, [
          "--pgdata",
          standbyData,
          "--wait",
          "--mode",
          "immediate",
          "stop",
        ]);
      } catch {
        // Already stopped.
      }
      await Deno.remove(standbyDir, { recursive: true });
    },
  };
  globalThis.addEventListener("unload", () => {
    if (standbyStopped) return;
    standbyStopped = true;
    runSync(`${bin}/pg_ctl`, ["--pgdata", standbyData, "--mode", "immediate", "stop"]);
    try {
      Deno.removeSync(standbyDir, { recursive: true });
    } catch {
      // Best effort.
    }
  });
  if (synchronous) {
    await waitForSynchronousStandby(
      `postgres://keygate@127.0.0.1:${primaryPort}/postgres?sslmode=disable`,
    );
  }
  return standby;
}

/**
 * One cluster for the whole `deno test` process, for test files that only
 * need databases (each gets its own): the first file to ask starts it and
 * records its port in a directory named after the process; the others read
 * it. It stops when the process ends. Files that stop or restart the server
 * use {@link startPostgres} instead.
 */
export async function sharedPostgres(): Promise<Pick<PostgresCluster, "createDatabase" | "urlOf">> {
  const stateDir = `${Deno.env.get("TMPDIR") ?? "/tmp"}/keygate-pg-shared-${Deno.pid}`;
  let port: number;
  try {
    await Deno.mkdir(stateDir);
    const cluster = await startPostgres({ shared: true, alsoRemove: [stateDir] });
    port = cluster.port;
    await Deno.writeTextFile(`${stateDir}/port.tmp`, String(port));
    await Deno.rename(`${stateDir}/port.tmp`, `${stateDir}/port`);
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    port = await waitForPort(`${stateDir}/port`);
  }
  const urlOf = (database: string) =>
    `postgres://keygate@127.0.0.1:${port}/${database}?sslmode=disable`;
  let counter = 0;
  return {
    urlOf,
    async createDatabase(prefix = "t") {
      const name = `${prefix}_${crypto.randomUUID().slice(0, 8)}_${++counter}`
        .toLowerCase().replace(/[^a-z0-9_]/g, "_");
      const sql = postgres(urlOf("postgres"), { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`CREATE DATABASE "${name}" TEMPLATE template0`);
      } finally {
        await sql.end();
      }
      return urlOf(name);
    },
  };
}

/**
 * The throwaway cluster of a test file, or `undefined` when PostgreSQL tests are skipped
 * ({@link POSTGRES_SKIP}): the file's tests are then `ignore`d.
 */
export async function startTestCluster(): Promise<PostgresCluster | undefined> {
  return POSTGRES_SKIP ? undefined : await startPostgres();
}
