/**
 * A request worker that dies once: the first copy to start (of any pool in
 * this process) throws an uncaught error shortly after it starts serving; its
 * replacement and the other workers are ordinary request workers.
 */
import "../../src/server/request_worker.ts";

const marker = Deno.env.get("KEYGATE_TEST_DIE_ONCE");
let first = false;
try {
  if (marker !== undefined) Deno.openSync(marker, { write: true, createNew: true }).close();
  first = marker !== undefined;
} catch { /* another copy died already */ }
if (first) {
  setTimeout(() => {
    throw new Error("worker died on purpose");
  }, 500);
}
