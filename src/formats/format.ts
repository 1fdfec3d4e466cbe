/**
 * The two document formats keygate reads and writes.
 *
 * @module
 */

/** A document format: GlobalGiving's XML or its JSON rendering. */
export type Format = "json" | "xml";
