/**
 * The admin API's routes: a method, a path pattern with `:name` segments,
 * whether it changes anything (write role), and a handler. Matching gives
 * the handler and its parameters, 405 with `Allow` for a known path and
 * another method, or `undefined`.
 *
 * @module
 */
import type { ChangeDeps } from "../../auth/changes.ts";
import type { AccountDeps } from "../../auth/users.ts";
import type { Clock } from "../../platform/clock.ts";
import type { Logger } from "../../platform/logger.ts";
import type { CounterTotals } from "../../platform/metrics.ts";
import type { PasswordHasher } from "../../passwords/passwords.ts";
import type { StatsHistory } from "../../auth/stats_history.ts";
import type { ThrottleRule } from "../../auth/throttle.ts";
import type { Operator, Store } from "../../store/store.ts";
import { HttpError } from "../errors.ts";

/** What the admin listener's handler needs. */
export interface AdminDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Hashes the passwords of users made or changed through the API. */
  hasher: PasswordHasher;
  /** The metrics' running totals (src/platform/metrics.ts), for the dashboard. */
  readCounters(): Promise<CounterTotals>;
  /** The token lifetime of users without their own, in seconds (shown in user details). */
  defaultTimeoutSeconds: number;
  /** The dashboard's last hour, sampled by main.ts; without it the history is empty. */
  history?: StatsHistory;
  /** The rule for failed operator sign-ins per client address (see src/auth/operators.ts). */
  operatorRule?: ThrottleRule;
}

/** What a route handler gets besides the request. */
export interface AdminContext {
  deps: AdminDeps;
  operator: Operator;
  /** The path's `:name` segments, decoded. */
  params: Record<string, string>;
  url: URL;
  /** The domain's change dependencies: actor `operator:<name>`. */
  changes: ChangeDeps;
  /** {@link changes} and the hasher, for changes that take a password. */
  accounts: AccountDeps;
}

/** One route of the admin API. */
export interface AdminRoute {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** Such as `/admin/v1/users/:id/keys`. */
  path: string;
  /** Whether the route changes state, so that only a `write` operator may call it. */
  write: boolean;
  handle(request: Request, context: AdminContext): Promise<Response>;
}

/** A matched route and its parameters. */
export interface RouteMatch {
  route: AdminRoute;
  params: Record<string, string>;
}

function matchPath(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split("/");
  const got = path.split("/");
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(":")) {
      if (got[i] === "") return undefined;
      try {
        params[want[i].slice(1)] = decodeURIComponent(got[i]);
      } catch {
        return undefined;
      }
    } else if (want[i] !== got[i]) {
      return undefined;
    }
  }
  return params;
}

/**
 * The route for `method` at `path`, or `undefined` when no route has that path.
 *
 * @throws {HttpError} 405 with `Allow` when the path exists with other methods.
 */
export function findAdminRoute(
  routes: readonly AdminRoute[],
  method: string,
  path: string,
): RouteMatch | undefined {
  const allowed: string[] = [];
  for (const route of routes) {
    const params = matchPath(route.path, path);
    if (params === undefined) continue;
    if (route.method === method || (method === "HEAD" && route.method === "GET")) {
      return { route, params };
    }
    allowed.push(route.method);
  }
  if (allowed.length === 0) return undefined;
  const allow = allowed.join(", ");
  throw new HttpError(
    405,
    "method_not_allowed",
    `Method ${method} is not allowed on this path: use ${allow}`,
    { headers: { allow } },
  );
}
