/** A logger whose lines tests can read. */
import { createLogger, type Logger } from "../../src/platform/logger.ts";

/** Log lines captured in memory, parsed. */
export function createCapturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: createLogger({ level: "debug", write: (line) => lines.push(line) }), lines };
}
