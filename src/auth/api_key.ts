/**
 * Reading the API key a request carries, in the places GlobalGiving clients
 * put it: the `api_key` query parameter or the `X-Api-Key` header.
 *
 * @module
 */

/** The API key as sent (trimmed of surrounding whitespace), or `undefined`. */
export function findRequestApiKey(request: Request, query: URLSearchParams): string | undefined {
  const value = query.get("api_key") ?? request.headers.get("x-api-key");
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}
