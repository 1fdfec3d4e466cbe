/**
 * A password worker: computes one argon2id hash or verification at a time,
 * off the main thread, so that N workers use N cores. Started by
 * src/passwords.ts; answers each job with its id.
 *
 * @module
 */
import { hashArgon2, verifyArgon2 } from "./argon2.ts";
import { openLibc } from "../platform/libc.ts";

/** A job for a password worker. */
export type PasswordJob =
  | { id: number; op: "hash"; password: string }
  | { id: number; op: "verify"; passwordHash: string; password: string };

/**
 * A password worker's answer; `ms` is the wall time the job took on the worker's thread (time
 * the thread waited for a CPU included), and `cpuMs` the CPU time the thread spent on it (where
 * it can be read), which the pool's admission estimate is built from.
 */
export type PasswordResult =
  | { id: number; ok: true; value: string | boolean; ms?: number; cpuMs?: number }
  | { id: number; ok: false; error: string };

/** The parts of a worker's global scope this module uses. */
interface WorkerScope {
  onmessage: ((event: MessageEvent<PasswordJob>) => void) | null;
  postMessage(message: PasswordResult): void;
}

/** The nice value password workers give their own thread where SCHED_IDLE is refused. */
export const WORKER_NICE = 19;

/** Linux's `SCHED_IDLE` policy (sched.h). */
const SCHED_IDLE = 5;

/**
 * Puts this thread in Linux's `SCHED_IDLE` class, or failing that at nice
 * 19, so that on a busy core the main thread, which serves secure requests,
 * always runs first and logins take what is left. A woken main thread
 * preempts an idle-class thread at once; a nice-19 one only at the end of its
 * time slice, which measured as twice the secure p99 under saturated logins
 * (3.2× against 1.9×). Best effort: on other systems, without `--allow-ffi`
 * or without glibc, the worker runs at normal priority and all else works.
 *
 * Returns the class it got: `"idle"`, `"nice"` or `"normal"`.
 */
function lowerPriority(): "idle" | "nice" | "normal" {
  const libc = openLibc({
    setpriority: { parameters: ["i32", "u32", "i32"], result: "i32" },
    sched_setscheduler: { parameters: ["i32", "i32", "buffer"], result: "i32" },
    gettid: { parameters: [], result: "i32" },
  });
  if (libc === undefined) return "normal";
  try {
    const tid = libc.symbols.gettid(); // with a thread id, Linux applies both to that thread only
    const PRIO_PROCESS = 0;
    const niced = libc.symbols.setpriority(PRIO_PROCESS, tid, WORKER_NICE) === 0;
    const param = new Uint8Array(4); // struct sched_param { int sched_priority = 0; }
    if (libc.symbols.sched_setscheduler(tid, SCHED_IDLE, param) === 0) return "idle";
    return niced ? "nice" : "normal";
  } finally {
    libc.close();
  }
}

/** Linux's `CLOCK_THREAD_CPUTIME_ID` (time.h). */
const CLOCK_THREAD_CPUTIME_ID = 3;

/**
 * A reader of this thread's CPU time in ms (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`, exact to
 * the nanosecond, where `getrusage` counts in scheduler ticks), or `undefined` where libc cannot
 * be opened: the pool then counts wall time.
 */
function openThreadCpuClock(): (() => number) | undefined {
  const libc = openLibc({ clock_gettime: { parameters: ["i32", "buffer"], result: "i32" } });
  if (libc === undefined) return undefined;
  const timespec = new BigInt64Array(2); // struct timespec { time_t tv_sec; long tv_nsec; }
  return () => {
    if (libc.symbols.clock_gettime(CLOCK_THREAD_CPUTIME_ID, timespec) !== 0) return NaN;
    return Number(timespec[0]) * 1000 + Number(timespec[1]) / 1e6;
  };
}

// Only when run as a worker (a module importing the types above must not install a handler).
if (typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope !== "undefined") {
  lowerPriority();
  const readCpuMs = openThreadCpuClock(); // open for the worker's life: read twice a job
  const scope = globalThis as unknown as WorkerScope;
  scope.onmessage = (event) => {
    const job = event.data;
    let result: PasswordResult;
    try {
      const started = performance.now();
      const cpuStarted = readCpuMs?.();
      const value = job.op === "hash"
        ? hashArgon2(job.password)
        : verifyArgon2(job.passwordHash, job.password);
      const cpuMs = cpuStarted === undefined ? NaN : readCpuMs!() - cpuStarted;
      result = {
        id: job.id,
        ok: true,
        value,
        ms: performance.now() - started,
        ...(Number.isFinite(cpuMs) ? { cpuMs } : {}),
      };
    } catch (error) {
      result = { id: job.id, ok: false, error: String(error) };
    }
    scope.postMessage(result);
  };
}
