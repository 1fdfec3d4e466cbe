/**
 * The shape of one row of the settings table and the helper that types a row
 * against the {@link Config} property it fills.
 *
 * @module
 */
import type { Config } from "./config.ts";
import { parseBoolean } from "./parsers.ts";

/** One setting: where it comes from, how it is parsed and how `--help` shows it. */
export interface Setting<K extends keyof Config = keyof Config> {
  /** The property of {@link Config} it fills. */
  key: K;
  /** The long flag, without `--`. */
  flag: string;
  /** The environment variable. */
  env: string;
  /** The default as text; absent for an optional setting. */
  default?: string;
  /** Text → value; throws `SyntaxError` saying what was expected. */
  parse(text: string): NonNullable<Config[K]>;
  /** The typed placeholder in `--help`: `N`, `PATH`, `DURATION`, `on|off`. */
  placeholder: string;
  description: string;
}

/** Types one row against the {@link Config} property it fills. */
export function setting<K extends keyof Config>(row: Setting<K>): Setting {
  return row as unknown as Setting;
}

/** Whether a setting is a boolean: a bare flag means on. */
export function isBooleanSetting(row: Setting): boolean {
  return row.parse === parseBoolean;
}
