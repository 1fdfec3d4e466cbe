/**
 * Who calls introspection or revocation: the caller authenticated by its key
 * (`X-Api-Key` or `api_key`), by `client_secret_basic`, or by
 * `client_secret_post` (`oauth_client.ts`), exactly one way per request; and
 * the token request it sent.
 *
 * @module
 */
import type { RequestContext } from "../context.ts";
import { HttpError } from "../errors.ts";
import type { Gate } from "../../auth/gate.ts";
import { isFormBody, readTokenRequest, type TokenRequest } from "../token_request.ts";
import { findRequestApiKey } from "../../auth/api_key.ts";
import type { KeyHolder } from "../../store/store.ts";
import type { AdmitLimits } from "../limits.ts";
import {
  type ClientCredentials,
  hasBasicAuthorization,
  parseFormCredentials,
  readBasicCredentials,
} from "../oauth_client.ts";

/** An authenticated caller of introspection or revocation and its token request. */
export interface AuthenticatedCaller {
  caller: KeyHolder;
  body: TokenRequest;
}

/** Reads the caller of introspection or revocation with `gate`, and admits it by its limits. */
export function createCallerReader(
  gate: Pick<Gate, "authenticateKey" | "authenticateClient">,
  admitLimits: AdmitLimits = () => {},
): (request: Request, context: RequestContext) => Promise<AuthenticatedCaller> {
  /**
   * The caller of introspection or revocation and its token request, the
   * caller authenticated by its key (`X-Api-Key` or `api_key`), by
   * `client_secret_basic`, or by `client_secret_post`: one of them.
   */
  async function readCaller(
    request: Request,
    context: RequestContext,
  ): Promise<AuthenticatedCaller> {
    // From the first sign of OAuth client authentication, errors are RFC 6749's.
    const isBasic = hasBasicAuthorization(request);
    if (isBasic) context.oauthClientAuth = "client_secret_basic";
    const keyGiven = findRequestApiKey(request, context.query) !== undefined;
    if (isBasic && keyGiven) throw moreThanOneWay();
    const basic = isBasic ? readBasicCredentials(request) : undefined;
    // Credentials outside the body are checked before the body is read; so is a missing key,
    // unless a form may carry client_secret_post.
    let caller = basic !== undefined
      ? await gate.authenticateClient(basic.id, basic.secret, context)
      : keyGiven || !isFormBody(request)
      ? await gate.authenticateKey(request, context)
      : undefined;
    const body = await readTokenRequest(request);
    if (body.form?.has("client_id") || body.form?.has("client_secret")) {
      context.oauthClientAuth ??= "client_secret_post";
      if (caller !== undefined) throw moreThanOneWay();
      let posted: ClientCredentials | undefined;
      try {
        posted = parseFormCredentials(body.form);
      } catch (error) {
        if (!(error instanceof SyntaxError)) throw error;
        throw new HttpError(400, "invalid_request", `Invalid client credentials: ${error.message}`);
      }
      caller = await gate.authenticateClient(posted!.id, posted!.secret, context);
    }
    // No credentials at all: the key check says what is missing.
    caller ??= await gate.authenticateKey(request, context);
    context.apiKeyId = caller.apiKeyId;
    await admitLimits(context, caller);
    return { caller, body };
  }
  return readCaller;
}

function moreThanOneWay(): HttpError {
  return new HttpError(
    400,
    "invalid_request",
    "The client authenticated in more than one way: send X-Api-Key, Basic credentials " +
      "or client_id and client_secret, only one",
  );
}
