/**
 * A lock-free commit counter for a SQLite database in WAL mode, read from
 * the shared WAL index (the `-shm` file).
 *
 * Asking SQLite whether another connection has committed (`PRAGMA
 * data_version`) starts a read transaction: two `fcntl` locks and an `fstat`,
 * about 3 µs, on every secure request. The WAL index header instead holds
 * `iChange`, which every commit increments before it returns
 * (https://sqlite.org/walformat.html, "The WAL-Index Header"). Reading it
 * from a shared memory map costs a load. The grant cache compares it first
 * and asks SQLite only when it moved.
 *
 * Linux only (glibc, `--allow-ffi`); elsewhere {@link openCommitCounter}
 * returns `undefined` and callers ask SQLite every time.
 *
 * Two rules keep SQLite safe:
 * - The map is read-only and never outlives the file: SQLite only shrinks
 *   the `-shm` file when no connection has the database open, and the store
 *   holding this counter has it open until {@link CommitCounter.close}.
 * - Our file descriptor is closed only when no store of this process has
 *   the database open any more (one shared, counted descriptor per
 *   database): closing any descriptor of a file drops every POSIX lock this
 *   process holds on it, SQLite's included.
 *
 * @module
 */
import { openLibc } from "../../platform/libc.ts";

/** The WAL index header, as a reader sees it. */
const HEADER = {
  /** Bytes of the first header copy, the one writers update last. */
  bytes: 48,
  /** u32 words: `iVersion` at 0, `iChange` at 2, `aCksum` at 10 and 11; `isInit` is byte 12. */
  versionWord: 0,
  changeWord: 2,
  checksumWords: [10, 11],
  initByte: 12,
  /** The only wal-index version there is (SQLite 3.7.0 and later). */
  version: 3007000,
} as const;

const O_RDONLY = 0;
const O_CLOEXEC = 0o2000000;
const PROT_READ = 1;
const MAP_SHARED = 1;
const PAGE_BYTES = 4096;
const MAP_FAILED = 0xffff_ffff_ffff_ffffn;

/** Commits seen in a database's WAL index. */
export interface CommitCounter {
  /**
   * A stamp that moves with every commit by any connection, or `undefined`
   * when the index cannot be read: ask SQLite instead.
   */
  read(): number | undefined;
  /** Releases the mapping (unmapped when this process's last counter on it is closed). */
  close(): void;
}

const UNAVAILABLE: CommitCounter = { read: () => undefined, close() {} };

/** One mapping of a `-shm` file, shared by every counter of this process on that database. */
interface SharedMap {
  words: Uint32Array | undefined;
  users: number;
  release(): void;
}

/**
 * By real path of the database. POSIX locks belong to the process: closing
 * our descriptor while any connection of this process still has the
 * database open would drop that connection's locks on the `-shm` file. So
 * the descriptor is shared, counted, and closed when the last counter is.
 */
const maps = new Map<string, SharedMap>();

function mapIndex(realPath: string): SharedMap | undefined {
  const libc = openLibc({
    open: { parameters: ["buffer", "i32"], result: "i32" },
    close: { parameters: ["i32"], result: "i32" },
    mmap: { parameters: ["pointer", "usize", "i32", "i32", "i32", "i64"], result: "pointer" },
    munmap: { parameters: ["pointer", "usize"], result: "i32" },
  });
  if (libc === undefined) return undefined;
  const lib = libc.symbols;
  let fd = -1;
  let map: Deno.PointerValue = null;
  let words: Uint32Array | undefined;
  try {
    if (Deno.statSync(`${realPath}-shm`).size >= PAGE_BYTES) {
      fd = lib.open(new TextEncoder().encode(`${realPath}-shm\0`), O_RDONLY | O_CLOEXEC);
    }
    if (fd >= 0) {
      const mapped = lib.mmap(null, BigInt(PAGE_BYTES), PROT_READ, MAP_SHARED, fd, 0n);
      if (mapped !== null && Deno.UnsafePointer.value(mapped) !== MAP_FAILED) map = mapped;
    }
    if (map !== null) {
      const bytes = Deno.UnsafePointerView.getArrayBuffer(map, HEADER.bytes);
      const header = new Uint32Array(bytes);
      const isInit = new Uint8Array(bytes)[HEADER.initByte] === 1;
      if (header[HEADER.versionWord] === HEADER.version && isInit) words = header;
    }
  } catch {
    words = undefined; // no -shm file (not WAL mode), or no read permission
  }
  const shared: SharedMap = {
    words,
    users: 0,
    release() {
      if (--shared.users > 0) return;
      maps.delete(realPath);
      shared.words = undefined;
      if (map !== null) lib.munmap(map, BigInt(PAGE_BYTES));
      // Even when mapping failed, the descriptor stays open until here: see above.
      if (fd >= 0) lib.close(fd);
      libc.close();
    },
  };
  return shared;
}

/**
 * Maps the WAL index of the database at `dbPath`, which this process must
 * already have open in WAL mode. Where that is not possible (not Linux, no
 * `--allow-ffi`, no `-shm` file, an unknown format) the counter reads
 * `undefined`.
 *
 * What it reads is `iChange` (its low 21 bits) together with the header's
 * checksum: after a crashed writer, SQLite rebuilds the index and `iChange`
 * starts again from 0, so it alone could come back to a value already seen.
 */
export function openCommitCounter(dbPath: string): CommitCounter {
  if (Deno.build.os !== "linux") return UNAVAILABLE;
  let realPath;
  try {
    realPath = Deno.realPathSync(dbPath); // SQLite puts -shm beside the file a link points to
  } catch {
    return UNAVAILABLE;
  }
  const shared = maps.get(realPath) ?? mapIndex(realPath);
  if (shared === undefined) return UNAVAILABLE;
  maps.set(realPath, shared);
  shared.users++;
  let open = true;
  return {
    read() {
      const words = shared.words;
      if (!open || words === undefined) return undefined;
      const checksum = (words[HEADER.checksumWords[0]] ^ words[HEADER.checksumWords[1]]) >>> 0;
      return checksum * 2 ** 21 + (words[HEADER.changeWord] & 0x1f_ffff);
    },
    close() {
      if (!open) return;
      open = false;
      shared.release();
    },
  };
}
