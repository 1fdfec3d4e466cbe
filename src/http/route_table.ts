/**
 * The route table both listeners serve from: each row is a method, a path,
 * who may call it, and a handler. A path is exact (`/api/userservice/tokens`)
 * or has `:name` segments (`/admin/v1/users/:id`), given to the handler
 * decoded. The listener reads {@link Route.caller} and authenticates before
 * the handler runs; the table only matches.
 *
 * @module
 */
import { HttpError } from "./errors.ts";
import type { RouteHandler } from "./route.ts";

/**
 * Who may call a route:
 * - `anyone`: no credential is checked before the handler (it may check its own: the token
 *   endpoint's `auth_request`, an OAuth client's credentials);
 * - `client`: an API key or OAuth client credentials, which the handler checks (they may be
 *   in the body, read only by the handler);
 * - `api_key`: a usable API key;
 * - `token`: an API key and an access token of its user (a secure path);
 * - `operator`: any operator of the admin API; `writer`: an operator with the `write` role;
 * - `session`: a signed-in developer portal user (its session cookie); `session+csrf`: also
 *   the portal's `Origin`, when sent, and the session's CSRF token (a change).
 */
export type Caller =
  | "anyone"
  | "client"
  | "api_key"
  | "token"
  | "operator"
  | "writer"
  | "session"
  | "session+csrf";

/** One row of a route table. `method` `*` takes every method. */
export interface Route<C> {
  method: string;
  path: string;
  caller: Caller;
  handle: RouteHandler<C>;
}

/** A route found for a request, with its path's `:name` segments. */
export interface RouteMatch<C> {
  route: Route<C>;
  params: Record<string, string>;
}

/** The path has routes, none for the method: who may learn that, and what `Allow` says. */
export interface MethodMismatch {
  /** The caller of the path's first route: a listener authenticates it before answering 405. */
  caller: Caller;
  allow: string;
}

/** Options for {@link createRouteTable}. */
export interface RouteTableOptions {
  /** `HEAD` takes a `GET` route (the admin listener). Default `false`. */
  headAsGet?: boolean;
  /** Methods `Allow` names after the routes' own (the public listener: `OPTIONS`). */
  alsoAllowed?: readonly string[];
}

/** A route table, matched by method and path. */
export interface RouteTable<C> {
  readonly routes: readonly Route<C>[];
  /** The route, a {@link MethodMismatch}, or `undefined` when no route has the path. */
  match(method: string, path: string): RouteMatch<C> | MethodMismatch | undefined;
}

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

function matchPattern(
  pattern: readonly string[],
  path: string,
): Record<string, string> | undefined {
  const got = path.split("/");
  if (pattern.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i].startsWith(":")) {
      if (got[i] === "") return undefined;
      try {
        params[pattern[i].slice(1)] = decodeURIComponent(got[i]);
      } catch {
        return undefined;
      }
    } else if (pattern[i] !== got[i]) {
      return undefined;
    }
  }
  return params;
}

/** Builds a table; exact paths are found with one map lookup, patterns in order. */
export function createRouteTable<C>(
  routes: readonly Route<C>[],
  options: RouteTableOptions = {},
): RouteTable<C> {
  const exact = new Map<string, Route<C>[]>();
  const patterns: { segments: string[]; route: Route<C> }[] = [];
  for (const route of routes) {
    if (route.path.includes("/:")) {
      patterns.push({ segments: route.path.split("/"), route });
    } else {
      const list = exact.get(route.path) ?? [];
      list.push(route);
      exact.set(route.path, list);
    }
  }
  const headAsGet = options.headAsGet ?? false;
  const alsoAllowed = options.alsoAllowed ?? [];

  function isFor(route: Route<C>, method: string): boolean {
    return route.method === method || route.method === "*" ||
      (headAsGet && method === "HEAD" && route.method === "GET");
  }

  function match(method: string, path: string): RouteMatch<C> | MethodMismatch | undefined {
    const found = exact.get(path);
    if (found !== undefined && patterns.length === 0) {
      // The public listener's table (no patterns): the secure path's lookup stays one map read.
      for (const route of found) if (isFor(route, method)) return { route, params: NO_PARAMS };
      return toMismatch(found);
    }
    const candidates: RouteMatch<C>[] = (found ?? []).map((route) => ({
      route,
      params: NO_PARAMS,
    }));
    for (const { segments, route } of patterns) {
      const params = matchPattern(segments, path);
      if (params !== undefined) candidates.push({ route, params });
    }
    for (const candidate of candidates) if (isFor(candidate.route, method)) return candidate;
    return candidates.length === 0 ? undefined : toMismatch(candidates.map((c) => c.route));
  }

  function toMismatch(atPath: readonly Route<C>[]): MethodMismatch {
    const allow = [...atPath.map((route) => route.method), ...alsoAllowed].join(", ");
    return { caller: atPath[0].caller, allow };
  }

  return { routes, match };
}

/** Whether {@link RouteTable.match} found a route. */
export function isRouteMatch<C>(
  found: RouteMatch<C> | MethodMismatch | undefined,
): found is RouteMatch<C> {
  return found !== undefined && "route" in found;
}

/** The answer to a known path asked with another method: 405 with `Allow`. */
export function methodNotAllowed(method: string, mismatch: MethodMismatch): HttpError {
  return new HttpError(
    405,
    "method_not_allowed",
    `Method ${method} is not allowed on this path: use ${mismatch.allow}`,
    { headers: { allow: mismatch.allow } },
  );
}
