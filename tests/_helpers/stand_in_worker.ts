/**
 * Stand-in password workers, written to a temporary directory: a worker module's behaviour
 * without argon2id's cost.
 *
 * @module
 */

/** A stand-in worker module in a temporary directory, removed on dispose. */
export async function writeWorker(source: string) {
  const dir = await Deno.makeTempDir();
  const url = new URL(`file://${dir}/worker.ts`);
  await Deno.writeTextFile(url, source);
  return { url, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

/** A stand-in worker that takes `ms` per job (as a hash would), answering "done". */
export function writeTimedWorker(ms: number) {
  return writeWorker(
    `self.onmessage = (e) => {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${ms});
      self.postMessage({ id: e.data.id, ok: true, value: "done" });
    };`,
  );
}
