/**
 * How the server opens its store: the main thread and every request worker
 * (`--workers`) open it through this one function, so that they always use
 * the same database, backend and options.
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import { openStore } from "../store/open_store.ts";
import type { Store } from "../store/store.ts";

/** Opens the configured store for serving requests. */
export function openServerStore(config: Config): Promise<Store> {
  // Logins need no fsync on the thread that serves secure requests; revocations still get one.
  return openStore(config.dbPath, { sqlite: { durability: "grants" } });
}
