/**
 * A password worker: computes one argon2id hash or verification at a time,
 * off the main thread, so that N workers use N cores. Started by
 * src/passwords.ts; answers each job with its id.
 *
 * @module
 */
import { hashArgon2, verifyArgon2 } from "./argon2.ts";

/** A job for a password worker. */
export type PasswordJob =
  | { id: number; op: "hash"; password: string }
  | { id: number; op: "verify"; passwordHash: string; password: string };

/** A password worker's answer. */
export type PasswordResult =
  | { id: number; ok: true; value: string | boolean }
  | { id: number; ok: false; error: string };

/** The parts of a worker's global scope this module uses. */
interface WorkerScope {
  onmessage: ((event: MessageEvent<PasswordJob>) => void) | null;
  postMessage(message: PasswordResult): void;
}

/** The nice value password workers give their own thread: the secure path's thread comes first. */
export const WORKER_NICE = 19;

/**
 * Lowers this thread's scheduling priority on Linux (glibc `setpriority` on
 * the thread id), so that on a busy core the main thread, which serves secure
 * requests, runs first and logins take what is left. Best effort: on other
 * systems, without `--allow-ffi` or without glibc, the worker runs at normal
 * priority and everything else still works.
 */
function lowerPriority(): boolean {
  if (Deno.build.os !== "linux") return false;
  try {
    const libc = Deno.dlopen("libc.so.6", {
      setpriority: { parameters: ["i32", "u32", "i32"], result: "i32" },
      gettid: { parameters: [], result: "i32" },
    });
    const PRIO_PROCESS = 0; // with a thread id, Linux applies it to that thread only
    const ok = libc.symbols.setpriority(PRIO_PROCESS, libc.symbols.gettid(), WORKER_NICE) === 0;
    libc.close();
    return ok;
  } catch {
    return false;
  }
}

// Only when run as a worker (a module importing the types above must not install a handler).
if (typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope !== "undefined") {
  lowerPriority();
  const scope = globalThis as unknown as WorkerScope;
  scope.onmessage = (event) => {
    const job = event.data;
    let result: PasswordResult;
    try {
      const value = job.op === "hash"
        ? hashArgon2(job.password)
        : verifyArgon2(job.passwordHash, job.password);
      result = { id: job.id, ok: true, value };
    } catch (error) {
      result = { id: job.id, ok: false, error: String(error) };
    }
    scope.postMessage(result);
  };
}
