/**
 * A request worker whose disk fails every `fdatasync`: the real request worker, in an isolate
 * where `Deno.FsFile.prototype.syncData` rejects as a failing disk does (EIO), so that its
 * store's first WAL sync fails (src/store/sqlite/wal_sync.ts). The import only registers the
 * worker's message handler; the patch below runs before the first message arrives. Only this
 * worker's isolate is patched; the main thread and other tests are untouched.
 */
import "../../src/server/request_worker.ts";

Deno.FsFile.prototype.syncData = function () {
  return Promise.reject(new Error("Input/output error (os error 5)"));
};
