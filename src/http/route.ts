/**
 * A tiny exact-path router: a handler, or 405 with `Allow`, or no match.
 *
 * @module
 */
import { HttpError } from "./errors.ts";

/** A route handler: a request and its context in, a response out. */
export type RouteHandler<C> = (request: Request, context: C) => Response | Promise<Response>;

/** Routes by method, keyed by canonical path. */
export type Routes<C> = Record<string, Partial<Record<string, RouteHandler<C>>>>;

/**
 * Finds the handler for `method` at `path`, or `undefined` when no route has
 * that path.
 *
 * @throws {HttpError} 405 with `Allow` when the path exists but not the method.
 */
export function findRoute<C>(
  routes: Routes<C>,
  method: string,
  path: string,
): RouteHandler<C> | undefined {
  if (!Object.hasOwn(routes, path)) return undefined;
  const byMethod = routes[path];
  const handler = Object.hasOwn(byMethod, method) ? byMethod[method] : undefined;
  if (handler) return handler;
  const allow = [...Object.keys(byMethod), "OPTIONS"].join(", ");
  throw new HttpError(
    405,
    "method_not_allowed",
    `Method ${method} is not allowed on this path: use ${allow}`,
    { headers: { allow } },
  );
}
