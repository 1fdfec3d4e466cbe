/**
 * How the admin CLI prints: aligned tables or JSON, and ISO 8601 times.
 *
 * @module
 */
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
  const widths = columns.map((c) =>
    Math.max(c.length, ...rows.map((r) => String(r[c] ?? "-").length))
  );
  const line = (cells: string[]) =>
    cells.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd();
  io.stdout(line(columns.map((c) => c.toUpperCase())));
  for (const row of rows) io.stdout(line(columns.map((c) => String(row[c] ?? "-"))));
}

/** Milliseconds since the epoch as ISO 8601 UTC. */
export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}

/** {@link toIso}, keeping `null`. */
export function toIsoOrNull(ms: number | null): string | null {
  return ms === null ? null : toIso(ms);
}
