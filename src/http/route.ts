/**
 * A route handler's type, and routes by path and method: how an application
 * passes its own secure endpoints (`AppDeps.secureRoutes`). The listeners
 * serve them from their route table (route_table.ts).
 *
 * @module
 */

/** A route handler: a request and its context in, a response out. */
export type RouteHandler<C> = (request: Request, context: C) => Response | Promise<Response>;

/** Routes by method, keyed by canonical path. */
export type Routes<C> = Record<string, Partial<Record<string, RouteHandler<C>>>>;
