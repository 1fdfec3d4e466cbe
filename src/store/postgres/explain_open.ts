/**
 * Why a PostgreSQL store could not be opened, in one line an operator can
 * act on: the driver's reason, then what to check or change. The server's
 * start-up and the admin CLI print it after `Cannot open the store URL:`
 * (the URL without its password).
 *
 * The driver's messages name the host, user and database, never the
 * password; the hints name only what the location already shows.
 *
 * @module
 */
import type { PostgresLocation } from "../store_url.ts";

/** The environment the hints look at: only whether `PGPASSWORD` is set. */
export type HintEnv = Readonly<Record<string, string | undefined>>;

/**
 * The reason a store did not open, with a hint where one is known:
 * `REASON; HINT`. Never contains the password.
 */
export function explainPostgresOpenError(
  error: unknown,
  location: PostgresLocation,
  env: HintEnv,
): string {
  const chain = causes(error);
  const reason = chain.map((e) => e.message).filter((m, i, all) => all.indexOf(m) === i)
    .join(": ").replace(/\s+/g, " ").trim() || String(error);
  const hint = findHint(chain, location, env);
  return hint === undefined ? reason : `${reason}; ${hint}`;
}

interface Link {
  message: string;
  code?: string;
}

/** The error and its causes, outermost first. */
function causes(error: unknown): Link[] {
  const chain: Link[] = [];
  let current: unknown = error;
  while (current !== undefined && current !== null && chain.length < 5) {
    const e = current as { message?: unknown; code?: unknown; cause?: unknown };
    chain.push({
      message: typeof e.message === "string" ? e.message : String(current),
      code: typeof e.code === "string" ? e.code : undefined,
    });
    current = e.cause;
  }
  return chain;
}

function findHint(chain: Link[], at: PostgresLocation, env: HintEnv): string | undefined {
  const has = (test: (link: Link) => boolean) => chain.some(test);
  const code = (...codes: string[]) => has((l) => l.code !== undefined && codes.includes(l.code));
  const says = (pattern: RegExp) => has((l) => pattern.test(l.message));
  const address = `${at.host}:${at.port}`;

  if (at.sslmode !== "disable" && says(/before secure TLS connection was established/i)) {
    return `the server does not accept TLS, which sslmode=${at.sslmode} asks for (without ` +
      "sslmode in the URL: require for any host but localhost): turn ssl on in the server's " +
      "postgresql.conf, or add ?sslmode=disable to the URL if the network between is private";
  }
  if (
    at.sslmode === "verify-full" &&
    (says(/certificate|UnknownIssuer|NotValidForName|unable to verify/i) ||
      code("DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN", "CERT_HAS_EXPIRED"))
  ) {
    return `with sslmode=verify-full the server's certificate must be signed by a CA this ` +
      `system trusts and name ${at.host}: add the CA to the system's store (or give its file ` +
      "in DENO_CERT), or use sslmode=require (encrypted, certificate not checked)";
  }
  if (code("28P01") || says(/password authentication failed/i)) {
    if (at.password !== undefined) {
      return "check the password in the URL (percent-encode @, : and / in it)";
    }
    if ((env.PGPASSWORD ?? "") !== "") {
      return "the URL has no password, so PGPASSWORD's was used: check PGPASSWORD";
    }
    return "the URL has no password and PGPASSWORD is not set: put the password in the URL " +
      "(postgres://USER:PASSWORD@HOST/DATABASE, percent-encoded) or in PGPASSWORD";
  }
  if (says(/no pg_hba\.conf entry/i)) {
    return `the server's pg_hba.conf has no line that lets ${at.user} reach ${at.database} ` +
      `from this host${
        at.sslmode === "disable" ? " without TLS (try sslmode=require)" : ""
      }: add one and reload PostgreSQL`;
  }
  if (code("28000") && says(/role .* does not exist/i)) {
    return `create the role first: createuser --pwprompt ${at.user}`;
  }
  if (code("3D000")) {
    return `create the database first: createdb --owner ${at.user} ${at.database}`;
  }
  if (code("42501")) {
    return `${at.user} may not create keygate's tables: make it the database's owner ` +
      `(ALTER DATABASE ${at.database} OWNER TO ${at.user})`;
  }
  if (code("53300")) {
    return "the server's max_connections is reached: each keygate instance opens up to 11 " +
      "(docs/postgres.md, Operations)";
  }
  if (code("ECONNREFUSED")) {
    return `nothing accepts connections at ${address}: check that PostgreSQL runs and ` +
      "listens on that address and port (listen_addresses, port)";
  }
  if (code("ENOTFOUND", "EAI_AGAIN")) return `the host name ${at.host} does not resolve`;
  if (code("CONNECT_TIMEOUT", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH")) {
    return `${address} cannot be reached: check the host, the port and the firewalls between`;
  }
  return undefined;
}
