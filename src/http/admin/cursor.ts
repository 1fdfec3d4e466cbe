/**
 * The cursor of every paged admin list: `?cursor=` takes the `next` of the
 * page before, an opaque text (base64url of a JSON array of the last row's
 * sort keys). A cursor is not a secret and not signed: a forged one only
 * starts a page elsewhere in the same list the operator may read anyway.
 *
 * @module
 */
import { HttpError } from "../errors.ts";
import { hasControlCharacter } from "../../formats/printable.ts";

/** The types of a list's sort keys, in order. */
export type CursorShape = readonly ("string" | "number")[];

/** The `next` of a page that ends at a row with these sort keys. */
export function toCursorText(keys: readonly (string | number)[]): string {
  const bytes = new TextEncoder().encode(JSON.stringify(keys));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}

function invalidCursor(): HttpError {
  return new HttpError(
    400,
    "invalid_request",
    'Invalid "cursor": expected the "next" of a page of this list',
  );
}

/**
 * The sort keys in `?cursor=`, checked against the list's shape; `undefined` without one.
 *
 * @throws {HttpError} 400 for a cursor that is not one of this list's.
 */
export function readCursor(url: URL, shape: CursorShape): (string | number)[] | undefined {
  const text = url.searchParams.get("cursor");
  if (text === null) return undefined;
  if (text.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(text)) throw invalidCursor();
  let keys: unknown;
  try {
    const binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    keys = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw invalidCursor();
  }
  if (
    !Array.isArray(keys) || keys.length !== shape.length ||
    !keys.every((key, i) =>
      shape[i] === "number"
        ? Number.isSafeInteger(key)
        : typeof key === "string" && !hasControlCharacter(key)
    )
  ) {
    throw invalidCursor();
  }
  return keys;
}

/**
 * A page from `limit + 1` rows read after the cursor: the first `limit`, and the cursor of
 * the last of them (`null` when no row follows).
 */
export function toPage<T>(
  rows: readonly T[],
  limit: number,
  keysOf: (row: T) => readonly (string | number)[],
): { rows: T[]; next: string | null } {
  const page = rows.slice(0, limit);
  return {
    rows: page,
    next: rows.length > limit ? toCursorText(keysOf(page[page.length - 1])) : null,
  };
}
