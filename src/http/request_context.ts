/**
 * The public listener's per-request context (`RequestContext`, context.ts) as
 * the handler fills it in. Its URL and query are built only when something
 * reads them: most secure requests carry their credentials in headers and
 * never need either.
 *
 * @module
 */
import type { LimitStatuses } from "../auth/limit_status.ts";
import type { Principal } from "../auth/gate.ts";
import type { Format } from "../formats/format.ts";
import type { RequestContext } from "./context.ts";
import { invalidHost } from "./host.ts";
import type { ClientAuthMethod } from "./oauth_client.ts";
import type { RequestPath } from "./paths.ts";

/** What a request's context starts from: what is known before anything the client sent is read. */
export interface RequestContextInit {
  requestId: string;
  /** The format `Accept` asks for, if any this API answers in (negotiate.ts). */
  accepted: Format | undefined;
  /** The TCP peer's address (the client's until proxy mode says otherwise). */
  peerAddress: string;
  /** The listener's own scheme. */
  listenerScheme: "http" | "https";
  /** The path as sent, not yet canonical. */
  rawPath: string;
  /** The query as sent, with its `?` (or empty). */
  search: string;
}

/** A request's context, filled in as the request is handled. */
export class HandlerContext implements RequestContext {
  readonly requestId: string;
  /** The format `Accept` asks for; `undefined` when it names none this API answers in. */
  readonly accepted: Format | undefined;
  /** The response format: the path's suffix, else {@link accepted}, else XML. */
  format: Format;
  clientAddress: string;
  readonly peerAddress: string;
  scheme: "http" | "https";
  readonly listenerScheme: "http" | "https";
  readonly rawPath: string;
  readonly search: string;
  target?: Readonly<RequestPath>;
  forwardedFor?: string;
  clientNamed?: boolean;
  apiKeyId?: number;
  /** Set once the request is authenticated with a token (declared: one object shape). */
  principal?: Principal;
  oauthClientAuth?: ClientAuthMethod;
  limits?: LimitStatuses;
  /** Set once `Host` has been read and checked. */
  host?: string;
  /** A request of the developer portal (its errors are JSON: portal/portal_app.ts). */
  portal = false;
  #url?: URL;
  #query?: URLSearchParams;

  constructor(init: RequestContextInit) {
    this.requestId = init.requestId;
    this.accepted = init.accepted;
    this.format = init.accepted ?? "xml";
    this.clientAddress = init.peerAddress;
    this.peerAddress = init.peerAddress;
    this.scheme = init.listenerScheme;
    this.listenerScheme = init.listenerScheme;
    this.rawPath = init.rawPath;
    this.search = init.search;
  }

  get url(): URL {
    if (this.#url !== undefined) return this.#url;
    if (this.host === undefined) throw new TypeError("The request's Host has not been read");
    try {
      // Routing reads the path only through the canonical path rule; this URL serves the query.
      this.#url = new URL(`${this.listenerScheme}://${this.host}${this.rawPath}${this.search}`);
    } catch {
      throw invalidHost();
    }
    return this.#url;
  }

  /**
   * The query as sent, form-decoded. The same parameters as `url.searchParams`
   * (the URL parser only percent-encodes characters that form decoding turns
   * back), without parsing a URL for them.
   */
  get query(): URLSearchParams {
    return this.#query ??= new URLSearchParams(this.search);
  }
}
