/**
 * The upper bound of a prefix's range, for a backend that reads "every string that starts with
 * `prefix`" through an index as `prefix <= s < toPrefixEnd(prefix)`: a deletion's forgetting of
 * its address's counters (sqlite/ and postgres/user_deletion.ts).
 *
 * @module
 */

/**
 * The least string above every string that starts with `prefix`, in code point order (which is
 * the byte order of UTF-8: SQLite's `BINARY` collation, PostgreSQL's "C"): its last code point
 * that can grow, grown by one.
 * @throws {RangeError} for an empty prefix, or one of U+10FFFF alone (no such bound).
 */
export function toPrefixEnd(prefix: string): string {
  const points = [...prefix];
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!;
    if (last < 0x10ffff) {
      // Past the surrogates, which no string holds alone.
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
      return points.join("") + String.fromCodePoint(next);
    }
  }
  throw new RangeError("No string follows every string with this prefix");
}
