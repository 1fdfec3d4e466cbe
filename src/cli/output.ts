/**
 * How the admin CLI prints: aligned tables or JSON, ISO 8601 times, and
 * stored text made safe for a terminal.
 *
 * @module
 */
import { toPrintable } from "../formats/printable.ts";
import type { AdminIO } from "./io.ts";

/** Prints rows as an aligned table (`(none)` when empty) or, with `json`, as a JSON array. */
export function printRows(
  io: AdminIO,
  rows: Record<string, string | number | null>[],
  json?: boolean,
): void {
  if (json) {
    io.stdout(JSON.stringify(rows, null, 2));
    return;
  }
  if (rows.length === 0) {
    io.stdout("(none)");
    return;
  }
  const columns = Object.keys(rows[0]);
  // A stored value's line break or escape is shown as \u000a, \u001b, never acted on.
  const cells = rows.map((row) => columns.map((c) => toPrintable(String(row[c] ?? "-"), false)));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const line = (texts: string[]) =>
    texts.map((text, i) => text.padEnd(widths[i])).join("  ").trimEnd();
  io.stdout(line(columns.map((c) => c.toUpperCase())));
  for (const row of cells) io.stdout(line(row));
}

/** Milliseconds since the epoch as ISO 8601 UTC. */
export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}

/** {@link toIso}, keeping `null`. */
export function toIsoOrNull(ms: number | null): string | null {
  return ms === null ? null : toIso(ms);
}
