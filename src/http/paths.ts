/**
 * The canonical form of a request path, decided once and used for all
 * routing, so that no spelling of a secure path escapes authentication.
 *
 * The rule:
 * 1. Split the path on `/` and percent-decode each segment once. A segment
 *    that decodes to contain `/`, `\`, `%` or a control character is refused
 *    (400): such spellings only ever serve to smuggle a different path.
 * 2. Drop empty segments and `.`; let `..` remove the segment before it.
 * 3. A request is **secure** when any segment is `secure`, in any letter case.
 * 4. A trailing `.json` or `.xml` on the last segment selects the response
 *    format and is removed; a trailing slash is ignored.
 *
 * @module
 */
import { HttpError } from "./errors.ts";
import type { Format } from "./respond.ts";

/** A request path in canonical form. */
export interface RequestPath {
  /** `/`-joined decoded segments, without a format suffix or trailing slash. */
  path: string;
  /** Whether the request must carry an API key and an access token. */
  secure: boolean;
  /** The format named by a `.json`/`.xml` suffix, if any. */
  format?: Format;
}

// deno-lint-ignore no-control-regex
const FORBIDDEN_IN_SEGMENT = /[/\\%\x00-\x1f\x7f]/;
const FORMAT_SUFFIX = /\.(json|xml)$/;

/**
 * Canonicalises a URL's `pathname` (as `new URL()` gives it).
 *
 * @throws {HttpError} 400 for invalid percent-encoding or a forbidden character in a segment.
 */
export function parseRequestPath(pathname: string): RequestPath {
  const segments: string[] = [];
  let secure = false;
  for (const raw of pathname.split("/")) {
    let segment: string;
    try {
      segment = raw.includes("%") ? decodeURIComponent(raw) : raw;
    } catch {
      throw invalidPath("invalid percent-encoding");
    }
    if (segment !== raw && FORBIDDEN_IN_SEGMENT.test(segment)) {
      throw invalidPath("an encoded separator or control character");
    }
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      segments.pop();
      continue;
    }
    segments.push(segment);
  }
  for (const segment of segments) {
    if (segment.toLowerCase() === "secure") secure = true;
  }
  let format: Format | undefined;
  const last = segments.length - 1;
  const suffix = last >= 0 ? FORMAT_SUFFIX.exec(segments[last]) : null;
  if (suffix) {
    format = suffix[1] as Format;
    segments[last] = segments[last].slice(0, suffix.index);
  }
  const path = "/" + segments.join("/");
  return format ? { path, secure, format } : { path, secure };
}

function invalidPath(detail: string): HttpError {
  return new HttpError(400, "invalid_path", `Cannot route request path: it contains ${detail}`);
}
