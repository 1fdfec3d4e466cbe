/**
 * The admin CLI's surroundings (environment, output, password input, clock,
 * hasher), replaceable in tests, and its one error type.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { PasswordHasher } from "../passwords/passwords.ts";
import { MAX_PASSWORD_BYTES } from "../auth/account_rules.ts";

/** The admin CLI's surroundings, replaceable in tests. */
export interface AdminIO {
  env: Readonly<Record<string, string | undefined>>;
  stdout(text: string): void;
  stderr(text: string): void;
  /** The first line of standard input, without echo on a terminal. */
  readPassword(): Promise<string>;
  clock: Clock;
  hasher: PasswordHasher;
  /**
   * Receives one JSON line per change when asked for (`--log`); default standard error.
   * In tests, setting it also turns the lines on.
   */
  audit?(line: string): void;
}

/**
 * A failure the user can fix, printed as one line: exit 2 for a usage error
 * (wrong command, option or argument), exit 1 for anything else.
 */
export class AdminError extends Error {
  override name = "AdminError";
  constructor(message: string, readonly exitCode: 1 | 2 = 1) {
    super(message);
  }
}

/** Reads the first line of standard input; on a terminal, prompts without echo. */
export async function readPasswordFromStdin(): Promise<string> {
  const bytes: number[] = [];
  const buffer = new Uint8Array(1);
  const terminal = Deno.stdin.isTerminal();
  if (terminal) {
    Deno.stderr.writeSync(new TextEncoder().encode("Password: "));
    Deno.stdin.setRaw(true);
  }
  try {
    while (true) {
      const n = await Deno.stdin.read(buffer);
      if (n === null || buffer[0] === 0x0a || buffer[0] === 0x0d) break;
      if (terminal && buffer[0] === 0x03) throw new AdminError("Cancelled");
      bytes.push(buffer[0]);
      if (bytes.length > MAX_PASSWORD_BYTES) break;
    }
  } finally {
    if (terminal) {
      Deno.stdin.setRaw(false);
      Deno.stderr.writeSync(new TextEncoder().encode("\n"));
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** A message on one line: every run of white space one space. */
export function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}
