/**
 * {@link LifecycleStore} on SQLite: readiness, the write-failure probe, closing.
 *
 * @module
 */
import { existsSync } from "node:fs";
import type { LifecycleStore } from "../store.ts";
import type { Connection, Row } from "./connection.ts";

export function createLifecycleStore(conn: Connection): LifecycleStore {
  const ping = conn.sql("SELECT 1 AS ok");
  return {
    checkStoreReady() {
      return conn.read(() => {
        // A deleted database file still answers through its open descriptor,
        // but nothing written now would survive a restart: not ready.
        if (conn.path !== ":memory:" && !existsSync(conn.path)) return false;
        return (ping.get() as Row | undefined)?.ok === 1;
      });
    },
    findWriteFailure() {
      return conn.read(conn.findWriteFailure);
    },
    // deno-lint-ignore require-await
    async closeStore() {
      conn.close();
    },
  };
}
