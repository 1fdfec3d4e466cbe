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

/** What a store setting may be, for the end of every refusal. */
export const STORE_FORMS =
  "expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, sqlite:PATH or a file path";

/**
 * Parses a `--store` value: a URL keygate knows (`postgres://`,
 * `postgresql://`, `sqlite:PATH`) or a plain file path, never anything in
 * between: a text that looks like a URL but is not one of those (a scheme
 * with a typo or without its `//`, `USER:PASSWORD@` in a path, a libpq
 * `key=value` string, quotes an environment file passed through) is refused
 * rather than taken for the name of a new, empty SQLite file.
 *
 * Throws `SyntaxError` whose message says what is wrong and never contains
 * the password; the caller names the setting and shows the value through
 * {@link redactCredentials}.
 */
export function parseStoreUrl(text: string): StoreLocation {
  if (text.trim() === "") throw new SyntaxError("expected a URL or a path");
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1]?.toLowerCase();
  if (scheme === "postgres" || scheme === "postgresql") {
    if (text.slice(scheme.length, scheme.length + 3) !== "://") {
      throw new SyntaxError(
        `"${scheme}:" must be followed by "//" (${scheme}://USER@HOST/DATABASE); ${STORE_FORMS}`,
      );
    }
    return parsePostgresUrl(text);
  }
  if (scheme === "sqlite") {
    const rest = text.slice("sqlite:".length);
    if (rest === "") throw new SyntaxError("expected sqlite:PATH");
    // sqlite:///abs/path is the absolute path; sqlite://NAME would read as a host, not a path.
    if (rest.startsWith("//") && !rest.startsWith("///")) {
      throw new SyntaxError(
        "sqlite://NAME is not a path: write sqlite:PATH (relative) or sqlite:///PATH (absolute)",
      );
    }
    const path = rest.replace(/^\/\/(?=\/)/, "");
    const why = explainUrlLikePath(path);
    if (why !== undefined) throw new SyntaxError(`the path after "sqlite:" ${why}`);
    return { kind: "sqlite", path, display: path };
  }
  const why = explainUrlLikePath(text);
  if (why !== undefined) throw new SyntaxError(`it ${why}; ${STORE_FORMS}`);
  return { kind: "sqlite", path: text, display: text };
}

/**
 * Checks a `--db` value: a file path, never a URL (those go in `--store`).
 * Throws `SyntaxError` saying why, without the password.
 */
export function checkDatabasePath(text: string): void {
  if (/^(postgres|postgresql|sqlite):/i.test(text.trim())) {
    throw new SyntaxError("it is a store URL: give it with --store (--db takes a file path)");
  }
  const why = explainUrlLikePath(text);
  if (why !== undefined) {
    throw new SyntaxError(`it ${why}; --db takes a file path (a URL goes in --store)`);
  }
}

/** libpq's connection keywords, which make `host=db password=…` a connection string. */
const LIBPQ_KEYWORDS =
  /(^|\s)(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|options)\s*=/i;

/**
 * Why `path` cannot be a file path because it looks like (part of) a URL or a
 * connection string, as a phrase after "it", or `undefined` for a plain path.
 * A file name that really has a colon after its first two letters can be
 * given as `./NAME`.
 */
export function explainUrlLikePath(path: string): string | undefined {
  const text = path.trim();
  if (/^(["'`]).*\1$/s.test(text)) {
    return "is in quotes (an environment file may pass them through): remove them";
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1];
  if (text.includes("://")) {
    if (scheme === undefined) return 'has "://" in it, as a URL does';
    return /^(postgres|postgresql|sqlite)$/i.test(scheme)
      ? "is a URL, not a file path"
      : `is a URL (${scheme.toLowerCase()}://) of a kind keygate does not know`;
  }
  const missingColon = /^(postgres|postgresql|sqlite)\/\//i.exec(text)?.[1];
  if (missingColon !== undefined) {
    return `looks like a ${missingColon.toLowerCase()}:// URL with its ":" missing`;
  }
  // One letter and a colon is a Windows drive (C:\...); more is a URL scheme.
  if (scheme !== undefined && scheme.length > 1) {
    return `starts with "${scheme}:", which is not a store keygate knows ` +
      "(for a file name with a colon, write ./ before it)";
  }
  if (text.split("/").some((segment) => /:[^@]*@/.test(segment))) {
    return "has USER:PASSWORD@ in it, as a URL does";
  }
  if (/@[^/:]*:\d+(\/|$)/.test(text)) return "has USER@HOST:PORT in it, as a URL does";
  if (LIBPQ_KEYWORDS.test(text)) {
    return "is a key=value connection string: keygate takes a postgres:// URL";
  }
  return undefined;
}

/**
 * The port written in the URL, or 5432. http's grammar drops a written `:80` as its default, so
 * an empty port is asked again under https's (whose default is 443): `:80` survives there.
 */
function explicitPort(url: URL, text: string): number {
  if (url.port !== "") return Number(url.port);
  const again = new URL(text.replace(/^[a-z]+:/i, "https:")).port;
  return again === "" ? DEFAULT_PORT : Number(again);
}

function parsePostgresUrl(text: string): PostgresLocation {
  const hostList = splitHostList(text);
  let url: URL;
  try {
    // URL only parses the authority of "special" schemes; borrow http's grammar.
    url = new URL(hostList.firstOnly.replace(/^[a-z]+:/i, "http:"));
  } catch {
    throw new SyntaxError("cannot parse it as a URL");
  }
  const scheme = text.slice(0, text.indexOf(":")).toLowerCase();
  const user = decode(url.username, "user name");
  const password = url.password === "" ? undefined : decode(url.password, "password");
  const host = url.hostname;
  const database = decode(url.pathname.replace(/^\//, ""), "database name");
  const shown = (detail: string) => new SyntaxError(detail);
  if (host === "") throw shown("expected a host");
  if (user === "") throw shown("expected a user name (postgres://USER@HOST/DATABASE)");
  if (database === "" || database.includes("/")) {
    throw shown("expected one database name after the host");
  }
  const port = explicitPort(url, hostList.firstOnly);
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
  const shownHosts = hosts?.map((entry) => `${entry.host}:${entry.port}`).join(",") ??
    (url.port === "" && port !== DEFAULT_PORT ? `${host}:${port}` : url.host);
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

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new SyntaxError(`bad percent-encoding in the ${what}`);
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
  } else {
    // No "@": "USER:PASSWORD" with its host forgotten reads like "HOST:PORT". Only digits up to
    // the path can be a port; anything else after the first ":" may be a password.
    const authorityEnd = rest.search(/[/?#]/);
    const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
    const colon = authority.indexOf(":");
    if (colon >= 0 && !/^\d*$/.test(authority.slice(colon + 1))) {
      rest = `${authority.slice(0, colon)}:***${authorityEnd < 0 ? "" : rest.slice(authorityEnd)}`;
    }
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

/**
 * Any setting's value as it may be shown (in an error, a log line, a
 * listing): a URL through {@link redactRaw}; in anything else, what follows
 * the `:` of a `USER:PASSWORD@` up to the last `@` (a URL without its `://`,
 * say) and the value of a `password=` become `***`. Over-redacts rather than
 * show part of a password.
 */
export function redactCredentials(text: string): string {
  let shown = text.includes("://") ? redactRaw(text) : hideUserinfo(text);
  shown = shown.replace(/(password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|"[^"]*"?|[^\s&]+)/gi, "$1***");
  return shown;
}

function hideUserinfo(text: string): string {
  const at = text.lastIndexOf("@");
  if (at < 0) return text;
  // Past a leading scheme and its slashes ("postgres:/", "postgres//"), the user name starts;
  // a colon with no slash after it ("kg:hunter2@db") may already be the password's.
  const start = /^[a-z][a-z0-9+.-]*(?::\/+|\/+)/i.exec(text)?.[0].length ?? 0;
  const colon = text.indexOf(":", start);
  if (colon < 0 || colon > at) return text;
  return `${text.slice(0, colon)}:***${text.slice(at)}`;
}
