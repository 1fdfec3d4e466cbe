/**
 * The C library through FFI, for the few Linux facilities Deno does not
 * expose: thread scheduling (src/password_worker.ts), TCP_NODELAY on a
 * listener (src/nodelay.ts) and a read-only map of SQLite's WAL index
 * (src/store/sqlite/wal_index.ts). Each caller has a fallback for when it is missing.
 *
 * @module
 */

/**
 * Opens glibc with `symbols`, or returns `undefined` where that is not
 * possible: not Linux, no `--allow-ffi`, or no glibc (musl, say).
 */
export function openLibc<const S extends Deno.ForeignLibraryInterface>(
  symbols: S,
): Deno.DynamicLibrary<S> | undefined {
  if (Deno.build.os !== "linux") return undefined;
  try {
    return Deno.dlopen("libc.so.6", symbols);
  } catch {
    return undefined;
  }
}
