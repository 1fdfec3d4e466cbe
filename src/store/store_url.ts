/**
 * The `--store` / `KEYGATE_STORE` value: which backend, and where.
 *
 * - `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require|verify-full]`
 *   (also `postgresql://`) selects PostgreSQL; libpq's multi-host form
 *   `HOST1[:PORT1],HOST2[:PORT2],…` with `target_session_attrs=read-write|primary` names the
 *   servers of a primary and its standbys (see {@link PostgresLocation.hosts});
 * - `sqlite:PATH` or a plain path selects SQLite.
 *
 * Pure: parses text, touches nothing. The password is kept out of every
 * message and of {@link StoreLocation.display}, the only form fit for logs.
 *
 * @module
 */

/** How the PostgreSQL connection uses TLS. */
export type SslMode = "disable" | "require" | "verify-full";

const SSL_MODES: readonly SslMode[] = ["disable", "require", "verify-full"];

/** A PostgreSQL server and database. */
export interface PostgresLocation {
  kind: "postgres";
  host: string;
  port: number;
  database: string;
  user: string;
  /** `undefined` when the URL has none (trust, peer or a `.pgpass`-less setup). */
  password: string | undefined;
  /** Default `"require"` unless the host is a loopback address, then `"disable"`. */
  sslmode: SslMode;
  /** The URL with the password replaced by `***`: for logs, errors and status output. */
  display: string;
  /**
   * Every server of a multi-host URL (`HOST1:PORT1,HOST2:PORT2`), in the order given; absent
   * for one host. `host` and `port` are then the first entry's.
   */
  hosts?: readonly PostgresHost[];
  /**
   * Which server to use (libpq's `target_session_attrs`): absent for one host without it, and
   * `"read-write"` for several hosts without it (keygate writes: never a standby).
   */
  targetSessionAttrs?: TargetSessionAttrs;
}

/** One server of a multi-host URL. */
export interface PostgresHost {
  /** As in the URL; an IPv6 address keeps its brackets. */
  host: string;
  port: number;
}

/**
 * The `target_session_attrs` values keygate accepts: those that name a server it can write to
 * (`read-write`: not in recovery and not read-only by default; `primary`: not in recovery).
 */
export type TargetSessionAttrs = "read-write" | "primary";

const TARGET_SESSION_ATTRS: readonly TargetSessionAttrs[] = ["read-write", "primary"];

/** An SQLite database file. */
export interface SqliteLocation {
  kind: "sqlite";
  path: string;
  display: string;
}

export type StoreLocation = PostgresLocation | SqliteLocation;

const DEFAULT_PORT = 5432;

/** Hosts for which a missing `sslmode` means `disable`: the connection never leaves the machine. */
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

/**
 * Parses a `--store` value. Throws `SyntaxError` with a message that never
 * contains the password.
 */
export function parseStoreUrl(text: string): StoreLocation {
  if (text.trim() === "") throw new SyntaxError("Invalid store: expected a URL or a path");
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1]?.toLowerCase();
  if (scheme === "postgres" || scheme === "postgresql") return parsePostgresUrl(text);
  if (scheme === "sqlite") {
    const path = text.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (path === "") throw new SyntaxError('Invalid store "sqlite:": expected sqlite:PATH');
    return { kind: "sqlite", path, display: path };
  }
  // A Windows drive letter aside, a scheme we do not know is a mistake, not a file name.
  if (
    scheme !== undefined && scheme.length > 1 &&
    text.slice(scheme.length, scheme.length + 3) === "://"
  ) {
    throw new SyntaxError(
      `Invalid store "${scheme}://…": expected postgres://, postgresql://, sqlite:PATH or a path`,
    );
  }
  return { kind: "sqlite", path: text, display: text };
}

function parsePostgresUrl(text: string): PostgresLocation {
  const hostList = splitHostList(text);
  let url: URL;
  try {
    // URL only parses the authority of "special" schemes; borrow http's grammar.
    url = new URL(hostList.firstOnly.replace(/^[a-z]+:/i, "http:"));
  } catch {
    throw new SyntaxError(`Invalid store URL "${redactRaw(text)}": cannot parse it`);
  }
  const scheme = text.slice(0, text.indexOf(":")).toLowerCase();
  const user = decode(url.username, "user name", text);
  const password = url.password === "" ? undefined : decode(url.password, "password", text);
  const host = url.hostname;
  const database = decode(url.pathname.replace(/^\//, ""), "database name", text);
  const shown = (detail: string) =>
    new SyntaxError(`Invalid store URL "${redactRaw(text)}": ${detail}`);
  if (host === "") throw shown("expected a host");
  if (user === "") throw shown("expected a user name (postgres://USER@HOST/DATABASE)");
  if (database === "" || database.includes("/")) {
    throw shown("expected one database name after the host");
  }
  const port = url.port === "" ? DEFAULT_PORT : Number(url.port);
  if (url.hash !== "") throw shown("unexpected fragment");
  const hosts = hostList.entries?.map((entry) => parseHostEntry(entry, shown));
  let sslmode: SslMode | undefined;
  let targetSessionAttrs: TargetSessionAttrs | undefined;
  for (const [name, value] of url.searchParams) {
    if (name === "target_session_attrs") {
      targetSessionAttrs = parseTargetSessionAttrs(value, shown);
      continue;
    }
    if (name !== "sslmode") {
      throw shown(
        `unknown parameter "${name}": only sslmode and target_session_attrs are supported`,
      );
    }
    if (!(SSL_MODES as readonly string[]).includes(value)) {
      throw shown(`sslmode "${value}" is not one of ${SSL_MODES.join(", ")}`);
    }
    sslmode = value as SslMode;
  }
  if (hosts !== undefined) targetSessionAttrs ??= "read-write";
  sslmode ??= (hosts ?? [{ host }]).every((entry) => LOOPBACK.has(entry.host))
    ? "disable"
    : "require";
  const auth = encodeURIComponent(user) + (password === undefined ? "" : ":***");
  const shownHosts = hosts?.map((entry) => `${entry.host}:${entry.port}`).join(",") ?? url.host;
  const display = `${scheme}://${auth}@${shownHosts}/${encodeURIComponent(database)}` +
    `?sslmode=${sslmode}` +
    (targetSessionAttrs === undefined ? "" : `&target_session_attrs=${targetSessionAttrs}`);
  return {
    kind: "postgres",
    host,
    port,
    database,
    user,
    password,
    sslmode,
    display,
    ...(hosts === undefined ? {} : { hosts }),
    ...(targetSessionAttrs === undefined ? {} : { targetSessionAttrs }),
  };
}

/**
 * The host list of a multi-host URL (the authority after its last `@`, when it holds a comma):
 * `entries` are its parts, and `firstOnly` is the URL with the first part alone, which `URL`
 * parses. Without a comma, `entries` is undefined and `firstOnly` the text itself.
 */
function splitHostList(text: string): { firstOnly: string; entries?: string[] } {
  const start = text.indexOf("://");
  if (start < 0) return { firstOnly: text };
  const end = /[/?#]/.exec(text.slice(start + 3));
  const authorityEnd = end === null ? text.length : start + 3 + end.index;
  const at = text.lastIndexOf("@", authorityEnd - 1);
  const hostStart = at > start ? at + 1 : start + 3;
  const list = text.slice(hostStart, authorityEnd);
  if (!list.includes(",")) return { firstOnly: text };
  const entries = list.split(",");
  return { firstOnly: text.slice(0, hostStart) + entries[0] + text.slice(authorityEnd), entries };
}

function parseHostEntry(entry: string, shown: (detail: string) => SyntaxError): PostgresHost {
  const match = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(entry);
  const port = match?.[2] === undefined ? DEFAULT_PORT : Number(match[2]);
  let hostname = "";
  try {
    if (match !== null) hostname = new URL(`http://${match[1]}`).hostname;
  } catch {
    // Refused below.
  }
  if (hostname === "" || port < 1 || port > 65535) {
    throw shown(`expected HOST[:PORT] in each entry of the host list, not "${entry}"`);
  }
  return { host: hostname, port };
}

function parseTargetSessionAttrs(
  value: string,
  shown: (detail: string) => SyntaxError,
): TargetSessionAttrs {
  if ((TARGET_SESSION_ATTRS as readonly string[]).includes(value)) {
    return value as TargetSessionAttrs;
  }
  throw shown(
    `target_session_attrs "${value}" is not supported: expected ` +
      `${TARGET_SESSION_ATTRS.join(" or ")} (keygate writes, so never to a standby)`,
  );
}

function decode(part: string, what: string, text: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new SyntaxError(
      `Invalid store URL "${redactRaw(text)}": bad percent-encoding in the ${what}`,
    );
  }
}

/**
 * Hides the password of a URL-like text that may not parse: whatever follows
 * the first `:` of the user information (between `://` and the last `@`)
 * becomes `***`. Over-redacts rather than show part of a password. The
 * values of query parameters and the fragment become `***` too: libpq's
 * forms (`?user=kg&password=...`) put the password there.
 */
export function redactRaw(text: string): string {
  const start = text.indexOf("://");
  if (start < 0) return text;
  const end = text.lastIndexOf("@");
  let head = text.slice(0, start + 3);
  let rest = text.slice(start + 3);
  if (end > start) {
    const userinfo = text.slice(start + 3, end);
    const colon = userinfo.indexOf(":");
    head += (colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:***`) + "@";
    rest = text.slice(end + 1);
  }
  const hash = rest.indexOf("#");
  const fragment = hash < 0 ? "" : "#***";
  if (hash >= 0) rest = rest.slice(0, hash);
  const question = rest.indexOf("?");
  if (question < 0) return head + rest + fragment;
  const query = rest.slice(question + 1).split("&")
    .map((pair) => `${pair.split("=", 1)[0]}=***`).join("&");
  return `${head}${rest.slice(0, question)}?${query}${fragment}`;
}
