/**
 * CORS on the public listener: preflight answers, and the headers a
 * cross-origin request's response carries (`--cors-origins`). The admin
 * listener sends none, so other origins cannot read its answers.
 *
 * @module
 */

/** Methods preflight allows when keygate serves only its own endpoints. */
export const CORS_METHODS = "GET, POST, DELETE, OPTIONS";
/** With an upstream or the application's own routes, any method may be served. */
export const CORS_METHODS_ALL = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
const CORS_EXPOSED = "X-Request-Id, Retry-After, WWW-Authenticate";
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;

/** Options for {@link createCors}. */
export interface CorsOptions {
  /** `["*"]` or exact origins. */
  origins: readonly string[];
  /** What preflight allows: {@link CORS_METHODS} or {@link CORS_METHODS_ALL}. */
  methods: string;
}

/** A listener's CORS: preflight answers and response headers. */
export interface Cors {
  /** 204 with the allowed methods, and the requested headers if well-formed. */
  preflight(request: Request): Response;
  /**
   * CORS headers, only on cross-origin requests (those with `Origin`): other
   * clients ignore them, and every byte counts on the hot path (docs/performance.md:
   * larger responses leave in two TLS segments).
   */
  addHeaders(request: Request, headers: Headers): void;
}

/** Creates the CORS of a listener. */
export function createCors(options: CorsOptions): Cors {
  const { origins, methods } = options;
  const anyOrigin = origins.includes("*");
  return {
    preflight(request) {
      const headers = new Headers({ "access-control-allow-methods": methods });
      const requested = request.headers.get("access-control-request-headers");
      if (requested !== null && HEADER_LIST.test(requested.trim())) {
        headers.set("access-control-allow-headers", requested.trim());
      }
      headers.set("access-control-max-age", "600");
      headers.set("allow", methods);
      return new Response(null, { status: 204, headers });
    },
    addHeaders(request, headers) {
      const origin = request.headers.get("origin");
      if (origin === null) return;
      if (anyOrigin) {
        headers.set("access-control-allow-origin", "*");
      } else {
        headers.append("vary", "Origin");
        if (!origins.includes(origin)) return;
        headers.set("access-control-allow-origin", origin);
      }
      headers.set("access-control-expose-headers", CORS_EXPOSED);
    },
  };
}
