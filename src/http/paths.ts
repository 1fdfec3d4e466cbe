/**
 * THE canonical form of a request path. keygate's own routing, `--upstream`
 * and forward-auth (`X-Original-URI` / `X-Forwarded-Uri`) all read a path
 * through {@link parseRequestPath} and nothing else, so that keygate and any
 * backend behind it cannot disagree on whether a path is secure.
 *
 * The rule (docs/security.md, "Canonical paths", says the same for operators).
 * The input is the path exactly as the client sent it, before any URL parser
 * has normalised it:
 * 1. It starts with `/` and holds only RFC 3986 path characters (letters,
 *    digits, `-._~!$&'()*+,=:@`, `/`) and `%XX` escapes. Anything else
 *    (`\`, `;`, spaces, quotes, `|`, raw non-ASCII …) is refused.
 * 2. Each `/`-separated segment is percent-decoded exactly once, as UTF-8.
 *    A decoded segment must not contain `/`, `\`, `;`, `%`, `?`, `#` or a
 *    control character: such spellings only serve to smuggle another path
 *    past one of the two readers (double decoding, path parameters).
 * 3. A segment that is `.` or `..` (in any spelling) is refused: keygate does
 *    not guess how a backend resolves it. Empty segments (`//`) are dropped.
 * 4. A decoded segment that is not ASCII is refused, unless the operator
 *    opted in (`--unicode-paths on`); even then, rules 2 and 3 hold for its
 *    NFKC form (`／` is `/`, `；` is `;`, `．．` is `..`).
 * 5. A segment is **secure** when its name before the first `.` is `secure`
 *    in ASCII letters of any case (`secure`, `SECURE`, `Secure.json`). A
 *    segment that a Unicode-aware backend would read as such (NFKC, case fold,
 *    default-ignorable characters removed, cut at the first `.` or `:`, `+`
 *    read as a space, leading and trailing spaces trimmed: `ſecure`,
 *    `ＳＥＣＵＲＥ`, `secure%20`, `%20secure`, `secure+`, `secure::$DATA`) but
 *    that is not those bytes is refused. Every refusal is 400 `invalid_path`.
 * 6. A trailing `.json` or `.xml` on the last segment selects the response
 *    format and is removed from the routed path (what remains may not be
 *    empty, `.` or `..`); a trailing slash is ignored.
 *
 * @module
 */
import { HttpError } from "./errors.ts";
import type { Format } from "../formats/format.ts";

/** A request path in canonical form. */
export interface RequestPath {
  /** `/`-joined decoded segments, without a format suffix or trailing slash. */
  path: string;
  /** Whether the request must carry an API key and an access token. */
  secure: boolean;
  /** The format named by a `.json`/`.xml` suffix, if any. */
  format?: Format;
  /** Whether the path as sent ended with `/` (kept when forwarding). */
  trailingSlash?: boolean;
}

/** How strict the rule is; the default is the strictest. */
export interface PathOptions {
  /** Let decoded segments hold non-ASCII letters (rule 4); secure look-alikes are still refused. */
  allowUnicode?: boolean;
}

/** Rule 1: the characters a path may hold as sent. */
const RAW_PATH = /^\/(?:[A-Za-z0-9\-._~!$&'()*+,=:@/]|%[0-9A-Fa-f]{2})*$/;
/** Rule 2: what a decoded segment may not hold. */
// deno-lint-ignore no-control-regex
const FORBIDDEN_DECODED = /[/\\;%?#\x00-\x1f\x7f-\x9f]/;
// deno-lint-ignore no-control-regex
const NON_ASCII = /[^\x00-\x7f]/;
const FORMAT_SUFFIX = /\.(json|xml)$/;
/** Characters a Unicode-aware reader may ignore inside a name. */
const IGNORABLE = /[\p{Default_Ignorable_Code_Point}\p{Cf}]/gu;

/**
 * How a Unicode-aware, case-insensitive backend reads a segment's name:
 * NFKC, full case fold (approximated by upper- then lower-casing, which maps
 * `ſ` and `K` as a fold does), ignorable characters removed, and the name cut
 * at the first `.` or `:` (a suffix, an NTFS stream) with `+` read as a space
 * (form decoding) and leading and trailing spaces trimmed (Java's `trim()`,
 * Spring's `trimTokens`). An ASCII segment skips the Unicode steps, which
 * change nothing in ASCII: this runs on every segment of every request.
 */
export function toFoldedName(segment: string): string {
  const folded = NON_ASCII.test(segment)
    ? segment.normalize("NFKC").replace(IGNORABLE, "").toUpperCase().toLowerCase()
      .normalize("NFKC")
    : segment.toLowerCase();
  return folded.split(/[.:]/, 1)[0].replaceAll("+", " ").trim();
}

/** Whether `segment` (decoded) names `secure` in ASCII letters: `secure`, `SECURE.json`. */
function isSecureName(segment: string): boolean {
  const dot = segment.indexOf(".");
  return (dot === -1 ? segment : segment.slice(0, dot)).toLowerCase() === "secure";
}

/**
 * Canonicalises a request path as sent (no query, no fragment).
 *
 * @throws {HttpError} 400 `invalid_path` for anything rule 1-5 refuses.
 */
export function parseRequestPath(rawPath: string, options: PathOptions = {}): RequestPath {
  if (!RAW_PATH.test(rawPath)) {
    throw invalidPath("a character outside the RFC 3986 path characters (such as ; or \\)");
  }
  const segments: string[] = [];
  let secure = false;
  for (const raw of rawPath.split("/")) {
    if (raw === "") continue;
    let segment: string;
    try {
      segment = raw.includes("%") ? decodeURIComponent(raw) : raw;
    } catch {
      throw invalidPath("invalid percent-encoding");
    }
    if (FORBIDDEN_DECODED.test(segment)) {
      throw invalidPath("an encoded separator, parameter, escape or control character");
    }
    if (segment === "." || segment === "..") throw invalidPath("a dot segment");
    if (NON_ASCII.test(segment)) {
      if (!options.allowUnicode) throw invalidPath("non-ASCII characters");
      // A backend that normalises the path before splitting it reads x／secure as x/secure.
      const compatible = segment.normalize("NFKC");
      if (FORBIDDEN_DECODED.test(compatible) || compatible === "." || compatible === "..") {
        throw invalidPath("a character that is a separator, parameter, escape or dot in NFKC");
      }
    }
    if (isSecureName(segment)) {
      secure = true;
    } else if (toFoldedName(segment) === "secure") {
      throw invalidPath('a spelling of "secure" that is not its ASCII letters');
    }
    segments.push(segment);
  }
  let format: Format | undefined;
  const last = segments.length - 1;
  const suffix = last >= 0 ? FORMAT_SUFFIX.exec(segments[last]) : null;
  if (suffix) {
    format = suffix[1] as Format;
    segments[last] = segments[last].slice(0, suffix.index);
    const name = segments[last];
    if (name === "") throw invalidPath("an empty name before its format suffix");
    if (name === "." || name === "..") throw invalidPath("a dot segment before its format suffix");
  }
  const path = "/" + segments.join("/");
  const target: RequestPath = { path, secure };
  if (format) target.format = format;
  if (rawPath.length > 1 && rawPath.endsWith("/")) target.trailingSlash = true;
  return target;
}

/**
 * The format a path's `.json`/`.xml` suffix names (rule 6), also for a path
 * that the rule refuses: the last non-empty segment, decoded when it can be.
 * A 400 for the path (or the `Host`) then answers in the format that a valid
 * path with that suffix would get, as every other answer does.
 */
export function findSuffixFormat(rawPath: string): Format | undefined {
  const end = rawPath.replace(/\/+$/, "");
  const last = end.slice(end.lastIndexOf("/") + 1);
  let name = last;
  try {
    if (last.includes("%")) name = decodeURIComponent(last);
  } catch {
    // Not decodable: read as sent.
  }
  return FORMAT_SUFFIX.exec(name)?.[1] as Format | undefined;
}

/** Paths longer than this are parsed every time rather than remembered. */
const MAX_REMEMBERED_PATH = 256;

/**
 * {@link parseRequestPath} with `options`, remembering the last `capacity`
 * distinct paths it accepted (a request path is read on every request, and
 * most requests repeat a few paths). The answer depends on the path and the
 * options alone, so a remembered one is exact; answers are frozen because
 * they are shared. When full, the memory starts over: a client sending ever
 * new paths costs it nothing but the parsing it would have cost anyway.
 */
export function createPathParser(
  options: PathOptions = {},
  capacity = 1024,
): (rawPath: string) => Readonly<RequestPath> {
  const remembered = new Map<string, Readonly<RequestPath>>();
  return (rawPath) => {
    const known = remembered.get(rawPath);
    if (known !== undefined) return known;
    const target = Object.freeze(parseRequestPath(rawPath, options));
    if (rawPath.length <= MAX_REMEMBERED_PATH) {
      if (remembered.size >= capacity) remembered.clear();
      remembered.set(rawPath, target);
    }
    return target;
  };
}

/**
 * Splits a request target as sent (`/path?query`, or what `Deno.serve` puts
 * in `Request.url`: `scheme://authority/path?query`) into its raw path and
 * its query (`""` or `?…`); a fragment is dropped.
 */
export function splitRequestTarget(target: string): { rawPath: string; search: string } {
  const rest = target.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/, "");
  const end = rest.search(/[?#]/);
  const rawPath = end === -1 ? rest : rest.slice(0, end);
  let search = "";
  if (end !== -1 && rest[end] === "?") {
    const hash = rest.indexOf("#", end);
    search = hash === -1 ? rest.slice(end) : rest.slice(end, hash);
  }
  return { rawPath: rawPath === "" ? "/" : rawPath, search: search === "?" ? "" : search };
}

function invalidPath(detail: string): HttpError {
  return new HttpError(400, "invalid_path", `Cannot route request path: it contains ${detail}`);
}
