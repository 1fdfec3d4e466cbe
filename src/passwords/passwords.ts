/**
 * Password hashing and verification with argon2id, in a pool of workers.
 *
 * Hashing is deliberately slow (milliseconds and 19 MiB each), so it is the
 * resource an attacker would exhaust. `@node-rs/argon2`'s async calls run one
 * at a time under Deno, so keygate runs the synchronous ones in Web Workers:
 * one per CPU by default, each computing one hash at a time, which lets
 * logins use every core and never blocks the main thread that serves secure
 * requests.
 *
 * Admission is by time, not by count: a job is accepted while its expected
 * wait (jobs ahead of it and itself, × the measured time a hash takes, ÷ the
 * workers) stays within `maxWaitMs`, and refused at once beyond that with a
 * Retry-After computed from the queue: the time the jobs out are expected to
 * take, after which the queue is (nearly) empty. The time a hash takes is an
 * exponentially weighted moving average of the measured ones
 * ({@link HASH_TIME_WEIGHT}), so a slower machine, or a busy one, admits
 * fewer. Two times are measured on the worker's thread: the hash's wall time
 * and, where the worker can read it, its CPU time. Admission counts the wall
 * time, but at most {@link CONTENTION_CAP} × the CPU time: the workers run in
 * the idle class, so a storm of requests (a client re-sending every refused
 * login at once) stretches their wall time without bound, and an estimate
 * following it refuses more, which brings more re-sent logins: a feedback
 * loop that left 5 of 50,000 logins answered (docs/performance.md, "Login
 * bursts"). The Retry-After counts the whole wall time: it says when the
 * queue is expected to have drained as hashes run now.
 *
 * The decision for a check asked now is also published in shared memory
 * (admission_board.ts), so that the login flow, here and in every request
 * worker, refuses before it reads anything from the database
 * ({@link PasswordHasher.findRefusal}).
 *
 * A job waiting is a small record (its input and two callbacks, about 3 KiB
 * at most), never a hash's memory: at most one hash runs per worker. A hard cap on the jobs waiting ({@link maxQueueFor}) protects
 * memory whatever the estimate says. An admitted job is never dropped for
 * time: when hashes slow down after it was admitted, it waits longer.
 *
 * A busy worker is handed its next job before it finishes the current one
 * (up to {@link JOBS_PER_WORKER}), so it never idles while the main thread
 * is busy elsewhere (a database commit, say) and cannot dispatch: that idle
 * time cost about a tenth of the login rate. A job handed ahead still counts
 * as waiting.
 *
 * @module
 */
import { createAdmissionBoard } from "./admission_board.ts";
import type { PasswordJob, PasswordResult } from "./password_worker.ts";

export { ARGON2_OPTIONS } from "./argon2.ts";

/** Hashes and verifies passwords. */
export interface PasswordHasher {
  /** Returns the argon2id PHC string for `password`. */
  hash(password: string): Promise<string>;
  /**
   * Whether `password` matches `passwordHash`. With `undefined` (unknown or
   * disabled user) it does the same work against a dummy hash and returns false.
   *
   * When `signal` aborts (the client went away) while the job still waits in
   * the queue, the job is dropped and the call rejects with a 400
   * `request_aborted`, so abandoned logins neither hold queue places nor cost
   * a hash. A job a worker already holds runs to the end.
   */
  verify(
    passwordHash: string | undefined,
    password: string,
    signal?: AbortSignal,
  ): Promise<boolean>;
  /** Stops the workers; pending and later calls reject. */
  close(): void;
  /**
   * The Retry-After (whole seconds, at least 1) a verification asked now would be refused with,
   * or `undefined` while it would be admitted: for refusing a login before any other work. The
   * verification itself is still admitted or refused on its own when it is asked.
   */
  findRefusal?(): number | undefined;
  /** The pool's admission board (admission_board.ts), for request workers to read. */
  readonly admissionBuffer?: SharedArrayBuffer;
}

/** What the pool's admission sees, for metrics and tests. */
export interface PasswordQueueState {
  /** Jobs accepted and not yet answered (computing, handed ahead, queued). */
  out: number;
  /**
   * The hash time admission counts, in ms: the wall time's average, at most
   * {@link CONTENTION_CAP} × the CPU time's.
   */
  hashMs: number;
  /** The moving average of hashes' CPU time, in ms (wall time where the worker cannot read it). */
  cpuMs: number;
  /** The moving average of hashes' wall time on their worker's thread, in ms (Retry-After). */
  wallMs: number;
  /** The bound on a job's expected wait, in ms. */
  maxWaitMs: number;
  /** The hard cap on jobs waiting (not computing). */
  maxQueue: number;
}

/** Options for {@link createPasswordHasher}. */
export interface PasswordHasherOptions {
  /** Workers, i.e. hashes computed at once. Default: the number of CPUs. */
  workers?: number;
  /**
   * The longest expected wait (ms) for which a job is still accepted; beyond it, 503.
   * Default: {@link DEFAULT_MAX_WAIT_MS}.
   */
  maxWaitMs?: number;
  /**
   * Hard cap on the jobs waiting (handed ahead or queued, not computing).
   * Default: {@link maxQueueFor}.
   */
  queue?: number;
  /** The hash time assumed until the first ones are measured. Default: {@link INITIAL_HASH_MS}. */
  initialHashMs?: number;
  /** The worker module. Default: src/password_worker.ts (tests swap in a broken one). */
  workerUrl?: URL;
  /** See {@link STARVED_AFTER_MS}. */
  starvedAfterMs?: number;
  /** Gives the workers the CPU for `ms` (default: the main thread sleeps). Tests observe it. */
  yieldCpu?: (ms: number) => void;
}

/**
 * The hash an unknown or disabled user's password is checked against: the
 * same parameters as every stored hash, so the work and time are the same.
 * Its password was a random UUID, thrown away. A constant rather than one
 * computed at run time, so that no first request pays for two hashes and no
 * failure to compute it can make unknown users answer differently.
 */
export const DUMMY_HASH =
  "$argon2id$v=19$m=19456,t=2,p=1$47iKqj5igRPIMrmMU08BMQ$wFT8wI07lOOVP0kKm/iAVOH+aqyrMANeHAyEdwYKjDo";

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

/** A verification given up because its request's signal aborted (the client went away). */
export class PasswordCheckAborted extends Error {
  constructor() {
    super("The client went away before its login was checked");
    this.name = "PasswordCheckAborted";
  }
}

/** The message of a refusal, the same whichever way it is refused. */
export const POOL_BUSY_MESSAGE = "Too many logins in progress: try again shortly";

/**
 * A job's expected wait exceeds the bound (or the queue is at its hard cap): the caller should
 * retry after `retryAfterSeconds` (whole seconds, at least 1), when the queue is expected to
 * have drained.
 */
export class PasswordPoolBusy extends Error {
  readonly retryAfterSeconds: number;
  constructor(retryAfterSeconds: number) {
    super(POOL_BUSY_MESSAGE);
    this.name = "PasswordPoolBusy";
    this.retryAfterSeconds = Math.max(1, Math.ceil(retryAfterSeconds));
  }
}

function aborted(): PasswordCheckAborted {
  return new PasswordCheckAborted();
}

/** Sleeps the calling thread (the main thread: no task runs meanwhile). */
function sleepThread(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** The longest expected wait for a hash by default: five seconds (`--login-queue-wait`). */
export const DEFAULT_MAX_WAIT_MS = 5000;

/**
 * The hash time assumed before any is measured (a worker's first hash is): one argon2id hash with
 * {@link ARGON2_OPTIONS} took 15–17 ms on the reference machine (58–65 hashes a second on one
 * core, docs/performance.md), rounded up.
 */
export const INITIAL_HASH_MS = 20;

/**
 * Weight of each new measured hash time in the moving average (about the last ten count); the
 * first measurement replaces {@link INITIAL_HASH_MS} outright.
 */
export const HASH_TIME_WEIGHT = 0.2;

/**
 * How far the hash time admission counts may exceed the CPU time: 2×. Beyond it the workers are
 * starved of CPU, by other processes or by this one's own requests, and the extra is counted no
 * more. Two, because a burst of 100 logins held in the queue on one core at 16–21 ms of CPU a hash
 * (the reference machine, and the quiet shared one of docs/performance.md) then stays within the
 * default bound of 5 s however the wall time swells (2 × 21 ms × 100 is 4.2 s): a client
 * re-sending at once finds every login admitted rather than a storm of refusals. Where hashes take
 * up to 2× their CPU time (a busy host), admission follows the wall time exactly; beyond that it
 * admits more than the wall time says, and an admitted login may wait longer than the bound.
 */
export const CONTENTION_CAP = 2;

/**
 * The fastest hash the hard cap allows for: a third of what argon2id over 19 MiB took on the
 * reference machine, so the cap refuses only where hashes are far faster than measured there,
 * or the estimate has gone wrong.
 */
export const MIN_HASH_MS = 5;

/**
 * The hard cap on jobs waiting for `workers` and a bound of `maxWaitMs`: as many as could finish
 * within the bound if each hash took {@link MIN_HASH_MS}; 2,000 with 2 workers and 5 s.
 */
export function maxQueueFor(workers: number, maxWaitMs: number): number {
  return Math.max(workers * JOBS_PER_WORKER, Math.ceil((workers * maxWaitMs) / MIN_HASH_MS));
}

type JobInput =
  | { op: "hash"; password: string }
  | { op: "verify"; passwordHash: string; password: string };

interface Job {
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

/**
 * Creates a hasher whose argon2id work runs in a pool of workers, started on
 * first use.
 */
export function createPasswordHasher(
  options: PasswordHasherOptions = {},
): PasswordHasher & {
  readQueue(): PasswordQueueState;
  findRefusal(): number | undefined;
  readonly admissionBuffer: SharedArrayBuffer;
} {
  const size = Math.max(1, options.workers ?? navigator.hardwareConcurrency ?? 1);
  const maxWaitMs = options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
  const maxQueue = options.queue ?? maxQueueFor(size, maxWaitMs);
  let cpuMs = options.initialHashMs ?? INITIAL_HASH_MS;
  let wallMs = cpuMs;
  /** The hash time admission counts (see CONTENTION_CAP). */
  const admittedHashMs = () => Math.max(cpuMs, Math.min(wallMs, CONTENTION_CAP * cpuMs));
  let measured = false;
  const board = createAdmissionBoard();
  const workerUrl = options.workerUrl ?? new URL("./password_worker.ts", import.meta.url);
  const pool: PoolWorker[] = [];
  const waiting: Job[] = [];
  let nextId = 1;
  let closed = false;
  let crashesInARow = 0;
  let broken: Error | undefined;

  function spawn(): PoolWorker {
    const member: PoolWorker = {
      worker: new Worker(workerUrl, { type: "module" }),
      jobs: [],
      since: 0,
      warm: false,
    };
    member.worker.onmessage = (event: MessageEvent<PasswordResult>) => {
      const current = member.jobs[0];
      if (current === undefined || current.id !== event.data.id) return;
      member.jobs.shift();
      const now = performance.now();
      // The worker's own timing when it sends one (so its first job, which also started it,
      // counts); else the time since it began the job, from its second job on.
      const took = event.data.ok && event.data.ms !== undefined
        ? event.data.ms
        : member.warm
        ? now - member.since
        : undefined;
      if (took !== undefined) {
        // The first measurement replaces the assumed time; later ones move the average.
        const cpu = event.data.ok && event.data.cpuMs !== undefined ? event.data.cpuMs : took;
        cpuMs = measured ? cpuMs + HASH_TIME_WEIGHT * (cpu - cpuMs) : cpu;
        wallMs = measured ? wallMs + HASH_TIME_WEIGHT * (took - wallMs) : took;
        measured = true;
      }
      member.warm = true;
      member.since = now;
      crashesInARow = 0;
      dispatchNext(member); // first, so the worker's next job is queued before it finishes this one
      publish();
      if (event.data.ok) current.job.resolve(event.data.value);
      else current.job.reject(new Error(`Password worker failed: ${event.data.error}`));
    };
    member.worker.onerror = (event: ErrorEvent) => {
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
        publish();
        return;
      }
      pool[index] = spawn();
      dispatchNext(pool[index]);
      publish();
    };
    return member;
  }

  function dispatch(member: PoolWorker, job: Job): void {
    const id = nextId++;
    if (member.jobs.length === 0) member.since = performance.now();
    member.jobs.push({ id, job });
    member.worker.postMessage({ id, ...job.input } as PasswordJob);
    watchForStarvation();
  }

  const starvedAfterMs = options.starvedAfterMs ?? STARVED_AFTER_MS;
  const yieldCpu = options.yieldCpu ?? sleepThread;
  let watchdog: ReturnType<typeof setInterval> | undefined;

  /** While any job is out, checks that the workers are not starved of CPU (see STARVED_AFTER_MS). */
  function watchForStarvation(): void {
    if (watchdog !== undefined) return;
    watchdog = setInterval(() => {
      const busy = pool.filter((member) => member.jobs.length > 0);
      if (busy.length === 0 || closed) {
        clearInterval(watchdog);
        watchdog = undefined;
        return;
      }
      const now = performance.now();
      if (busy.some((member) => now - member.since > starvedAfterMs)) {
        yieldCpu(STARVATION_RELIEF_MS);
      }
    }, STARVATION_CHECK_MS);
    Deno.unrefTimer(watchdog);
  }

  /** Tops a worker up to {@link JOBS_PER_WORKER} from the waiting jobs. */
  function dispatchNext(member: PoolWorker): void {
    while (member.jobs.length < JOBS_PER_WORKER && waiting.length > 0) {
      dispatch(member, waiting.shift()!);
    }
  }

  /** Jobs accepted and not yet answered: computing, handed ahead to a busy worker, or queued. */
  function countOut(): number {
    let held = 0;
    for (const member of pool) held += member.jobs.length;
    return waiting.length + held;
  }

  /**
   * The Retry-After (seconds, before rounding) a job asked now would be refused with, or
   * `undefined` when it would be admitted: an idle worker always takes it, however slow hashes
   * have been; else it waits while its expected wait (the jobs out and itself, × the hash time
   * admission counts, ÷ the workers) is within the bound and the queue under its hard cap.
   */
  function findRetryAfter(): number | undefined {
    if (pool.length < size || pool.some((member) => member.jobs.length === 0)) return undefined;
    const out = countOut();
    const hashMs = admittedHashMs();
    if (((out + 1) * hashMs) / size <= maxWaitMs && out - size < maxQueue) return undefined;
    // Retry once the jobs out now are expected to be done, as hashes run now: the queue is then
    // (nearly) empty.
    return (out * Math.max(hashMs, wallMs)) / size / 1000;
  }

  /** Writes the decision for the next job to the board (after every change of the queue). */
  function publish(): void {
    const seconds = broken === undefined && !closed ? findRetryAfter() : undefined;
    board.publish(seconds === undefined ? undefined : Math.max(1, Math.ceil(seconds)));
  }

  function run(input: JobInput, signal?: AbortSignal): Promise<string | boolean> {
    if (closed) return Promise.reject(new Error("Password hasher is closed"));
    if (broken !== undefined) return Promise.reject(broken);
    if (signal?.aborted) return Promise.reject(aborted());
    if (pool.length === 0) { for (let i = 0; i < size; i++) pool.push(spawn()); }
    return new Promise((resolve, reject) => {
      const retryAfter = findRetryAfter();
      if (retryAfter !== undefined) return reject(new PasswordPoolBusy(retryAfter));
      const job: Job = { input, resolve, reject };
      const idle = pool.find((member) => member.jobs.length === 0);
      const roomy = idle ?? pool.find((member) => member.jobs.length < JOBS_PER_WORKER);
      if (roomy !== undefined) dispatch(roomy, job);
      else {
        waiting.push(job);
        signal?.addEventListener("abort", () => {
          const index = waiting.indexOf(job);
          if (index === -1) return; // already handed to a worker: it runs to the end
          waiting.splice(index, 1);
          publish();
          reject(aborted());
        }, { once: true });
      }
      publish();
    });
  }

  return {
    readQueue() {
      return { out: countOut(), hashMs: admittedHashMs(), cpuMs, wallMs, maxWaitMs, maxQueue };
    },
    findRefusal() {
      const seconds = findRetryAfter();
      return seconds === undefined ? undefined : Math.max(1, Math.ceil(seconds));
    },
    admissionBuffer: board.buffer,
    async hash(password) {
      return await run({ op: "hash", password }) as string;
    },
    async verify(passwordHash, password, signal) {
      if (passwordHash !== undefined) {
        return await run({ op: "verify", passwordHash, password }, signal) as boolean;
      }
      // The same work as for a real user: verify against a hash of a random secret.
      await run({ op: "verify", passwordHash: DUMMY_HASH, password }, signal);
      return false;
    },
    close() {
      closed = true;
      clearInterval(watchdog);
      watchdog = undefined;
      for (const member of pool) {
        member.worker.terminate();
        for (const { job } of member.jobs.splice(0)) {
          job.reject(new Error("Password hasher is closed"));
        }
      }
      for (const job of waiting.splice(0)) job.reject(new Error("Password hasher is closed"));
      pool.length = 0;
      publish();
    },
  };
}
