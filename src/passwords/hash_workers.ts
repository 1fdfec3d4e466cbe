/**
 * The password pool's worker threads: spawning, handing jobs out, replacing crashed workers, and
 * keeping idle-class workers from starving.
 *
 * A job waiting is a small record (its input and two callbacks, about 3 KiB at most), never a
 * hash's memory: at most one hash runs per worker. An admitted job is never dropped for time:
 * when hashes slow down after it was admitted, it waits longer.
 *
 * A busy worker is handed its next job before it finishes the current one (up to
 * {@link JOBS_PER_WORKER}), so it never idles while the main thread is busy elsewhere (a database
 * commit, say) and cannot dispatch: that idle time cost about a tenth of the login rate. A job
 * handed ahead still counts as waiting.
 *
 * @module
 */
import type { PasswordJob, PasswordResult } from "./password_worker.ts";

/** Worker crashes, with no job done in between, after which the pool stops respawning. */
export const MAX_CRASHES_IN_A_ROW = 5;

/** Jobs a worker holds at once: the one it computes and the next. */
export const JOBS_PER_WORKER = 2;

/**
 * Workers run in the idle scheduling class, so a core kept busy by requests
 * (secure requests, or a client retrying a refused login in a tight loop)
 * would starve logins completely. When a worker's current job has waited
 * this long, the main thread sleeps {@link STARVATION_RELIEF_MS} every
 * {@link STARVATION_CHECK_MS} until it is done: at worst a tenth of the core
 * for logins, and only while they starve. Two seconds, not less: a worker
 * that gets only the idle moments of a busy core takes a few hundred ms a
 * hash, which is the priority we want, and each sleep stalls every secure
 * request in flight (at 500 ms the valve opened all the time under the
 * benchmark's saturated logins, and tripled secure p99).
 */
export const STARVED_AFTER_MS = 2000;
export const STARVATION_CHECK_MS = 100;
export const STARVATION_RELIEF_MS = 10;

/** Sleeps the calling thread (the main thread: no task runs meanwhile). */
function sleepThread(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** What a worker computes. */
export type JobInput =
  | { op: "hash"; password: string }
  | { op: "verify"; passwordHash: string; password: string };

/** A job accepted by the pool, with the promise callbacks of its caller. */
export interface Job {
  input: JobInput;
  resolve(value: string | boolean): void;
  reject(error: Error): void;
}

interface PoolWorker {
  worker: Worker;
  /** The jobs it holds, by id, in the order it computes them. */
  jobs: { id: number; job: Job }[];
  /** When its current job began (performance.now()): handed to it idle, or the last answered. */
  since: number;
  /** Whether it has answered a job: its first one's time includes starting the worker. */
  warm: boolean;
}

/** Options for {@link createHashWorkers}. */
export interface HashWorkersOptions {
  /** Workers to run. */
  size: number;
  /** The worker module. */
  workerUrl: URL;
  /** See {@link STARVED_AFTER_MS}. */
  starvedAfterMs?: number;
  /** Gives the workers the CPU for `ms` (default: the main thread sleeps). */
  yieldCpu?: (ms: number) => void;
  /** A hash was measured: its wall time and CPU time (the wall time where unknown), in ms. */
  onMeasured(wallMs: number, cpuMs: number): void;
  /** The jobs out changed without a call from the caller (answered, crashed, given up). */
  onChange(): void;
}

/** The worker threads and the jobs they hold or wait for. */
export interface HashWorkers {
  /** Starts the workers, if none run. */
  start(): void;
  /** Whether every worker runs and holds a job: only then may a new job have to wait. */
  allBusy(): boolean;
  /** Hands `job` to a worker with room; returns false when it queued it instead. */
  submit(job: Job): boolean;
  /** Takes a queued job out of the queue; false when a worker already holds it. */
  withdraw(job: Job): boolean;
  /** Jobs accepted and not yet answered: computing, handed ahead to a busy worker, or queued. */
  countOut(): number;
  /** The error every job fails with once workers kept crashing. */
  readonly broken: Error | undefined;
  readonly closed: boolean;
  /** Stops the workers; every job held or queued rejects. */
  close(): void;
}

/**
 * The time `member` took for the job it answers now, in ms: the worker's own timing when it sends
 * one (so its first job, which also started it, counts); else the time since it began the job,
 * from its second job on.
 */
function measureJob(member: PoolWorker, result: PasswordResult, now: number): number | undefined {
  if (result.ok && result.ms !== undefined) return result.ms;
  return member.warm ? now - member.since : undefined;
}

/**
 * While any job is out, checks that the workers are not starved of CPU (see STARVED_AFTER_MS).
 * `busySince` gives when each busy worker began its current job; none ends the watch.
 */
function createStarvationWatch(
  busySince: () => number[],
  starvedAfterMs: number,
  yieldCpu: (ms: number) => void,
): { start(): void; stop(): void } {
  let watchdog: ReturnType<typeof setInterval> | undefined;
  const stop = () => {
    clearInterval(watchdog);
    watchdog = undefined;
  };
  return {
    start() {
      if (watchdog !== undefined) return;
      watchdog = setInterval(() => {
        const since = busySince();
        if (since.length === 0) return stop();
        const now = performance.now();
        if (since.some((began) => now - began > starvedAfterMs)) yieldCpu(STARVATION_RELIEF_MS);
      }, STARVATION_CHECK_MS);
      Deno.unrefTimer(watchdog);
    },
    stop,
  };
}

/** Starts a worker on `workerUrl` whose answers and crash go to the pool. */
function spawnWorker(
  workerUrl: URL,
  answer: (member: PoolWorker, result: PasswordResult) => void,
  crash: (member: PoolWorker, event: ErrorEvent) => void,
): PoolWorker {
  const member: PoolWorker = {
    worker: new Worker(workerUrl, { type: "module" }),
    jobs: [],
    since: 0,
    warm: false,
  };
  member.worker.onmessage = (event: MessageEvent<PasswordResult>) => answer(member, event.data);
  member.worker.onerror = (event: ErrorEvent) => crash(member, event);
  return member;
}

/** Stops every worker of `pool` and rejects every job held or waiting with `error`. */
function rejectAll(pool: PoolWorker[], waiting: Job[], error: Error): void {
  for (const member of pool) {
    member.worker.terminate();
    for (const { job } of member.jobs.splice(0)) job.reject(error);
  }
  for (const job of waiting.splice(0)) job.reject(error);
}

/** Creates the worker threads of a password pool; none start before {@link HashWorkers.start}. */
export function createHashWorkers(options: HashWorkersOptions): HashWorkers {
  const { size, workerUrl, onMeasured, onChange } = options;
  const pool: PoolWorker[] = [];
  const waiting: Job[] = [];
  let nextId = 1;
  let closed = false;
  let crashesInARow = 0;
  let broken: Error | undefined;

  function answer(member: PoolWorker, result: PasswordResult): void {
    const current = member.jobs[0];
    if (current === undefined || current.id !== result.id) return;
    member.jobs.shift();
    const now = performance.now();
    const took = measureJob(member, result, now);
    if (took !== undefined) {
      onMeasured(took, result.ok && result.cpuMs !== undefined ? result.cpuMs : took);
    }
    member.warm = true;
    member.since = now;
    crashesInARow = 0;
    dispatchNext(member); // first, so the worker's next job is queued before it finishes this one
    onChange();
    if (result.ok) current.job.resolve(result.value);
    else current.job.reject(new Error(`Password worker failed: ${result.error}`));
  }

  function crash(member: PoolWorker, event: ErrorEvent): void {
    event.preventDefault();
    // A crashed worker is replaced; its job fails, the queue goes on. A worker that
    // cannot even start (its module missing, say) would crash forever: after
    // MAX_CRASHES_IN_A_ROW with no job done in between, the pool gives up.
    const error = new Error(`Password worker crashed: ${event.message}`);
    for (const { job } of member.jobs.splice(0)) job.reject(error);
    member.worker.terminate();
    const index = pool.indexOf(member);
    if (index === -1 || closed) return;
    if (++crashesInARow >= MAX_CRASHES_IN_A_ROW) {
      broken = error;
      for (const job of waiting.splice(0)) job.reject(error);
      onChange();
      return;
    }
    pool[index] = spawn();
    dispatchNext(pool[index]);
    onChange();
  }

  function spawn(): PoolWorker {
    return spawnWorker(workerUrl, answer, crash);
  }

  function dispatch(member: PoolWorker, job: Job): void {
    const id = nextId++;
    if (member.jobs.length === 0) member.since = performance.now();
    member.jobs.push({ id, job });
    member.worker.postMessage({ id, ...job.input } as PasswordJob);
    watch.start();
  }

  const watch = createStarvationWatch(
    () => pool.filter((member) => member.jobs.length > 0 && !closed).map((member) => member.since),
    options.starvedAfterMs ?? STARVED_AFTER_MS,
    options.yieldCpu ?? sleepThread,
  );

  /** Tops a worker up to {@link JOBS_PER_WORKER} from the waiting jobs. */
  function dispatchNext(member: PoolWorker): void {
    while (member.jobs.length < JOBS_PER_WORKER && waiting.length > 0) {
      dispatch(member, waiting.shift()!);
    }
  }

  return {
    start() {
      if (pool.length === 0) { for (let i = 0; i < size; i++) pool.push(spawn()); }
    },
    allBusy() {
      return pool.length >= size && pool.every((member) => member.jobs.length > 0);
    },
    submit(job) {
      const idle = pool.find((member) => member.jobs.length === 0);
      const roomy = idle ?? pool.find((member) => member.jobs.length < JOBS_PER_WORKER);
      if (roomy === undefined) {
        waiting.push(job);
        return false;
      }
      dispatch(roomy, job);
      return true;
    },
    withdraw(job) {
      const index = waiting.indexOf(job);
      if (index === -1) return false;
      waiting.splice(index, 1);
      return true;
    },
    countOut() {
      let held = 0;
      for (const member of pool) held += member.jobs.length;
      return waiting.length + held;
    },
    get broken() {
      return broken;
    },
    get closed() {
      return closed;
    },
    close() {
      closed = true;
      watch.stop();
      rejectAll(pool, waiting, new Error("Password hasher is closed"));
      pool.length = 0;
    },
  };
}
