/**
 * The `--store` / `KEYGATE_STORE` value: which backend, and where.
 *
 * - `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require|verify-full]`
 *   (also `postgresql://`) selects PostgreSQL;
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
}

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
  let url: URL;
  try {
    // URL only parses the authority of "special" schemes; borrow http's grammar.
    url = new URL(text.replace(/^[a-z]+:/i, "http:"));
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
  let sslmode: SslMode | undefined;
  for (const [name, value] of url.searchParams) {
    if (name !== "sslmode") {
      throw shown(`unknown parameter "${name}": only sslmode is supported`);
    }
    if (!(SSL_MODES as readonly string[]).includes(value)) {
      throw shown(`sslmode "${value}" is not one of ${SSL_MODES.join(", ")}`);
    }
    sslmode = value as SslMode;
  }
  sslmode ??= LOOPBACK.has(host) ? "disable" : "require";
  const auth = encodeURIComponent(user) + (password === undefined ? "" : ":***");
  const display = `${scheme}://${auth}@${url.host}/${encodeURIComponent(database)}` +
    `?sslmode=${sslmode}`;
  return { kind: "postgres", host, port, database, user, password, sslmode, display };
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
