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
 * Admission is by time, not by count: a job is accepted while its expected wait stays within
 * `maxWaitMs`, and refused at once beyond that with a Retry-After (admission.ts: the hash time it
 * counts and the decision). The worker threads, their queue, crashes and starvation are in
 * hash_workers.ts; this module puts the two together behind {@link PasswordHasher}.
 *
 * The decision for a check asked now is also published in shared memory
 * (admission_board.ts), so that the login flow, here and in every request
 * worker, refuses before it reads anything from the database
 * ({@link PasswordHasher.findRefusal}).
 *
 * @module
 */
import { createAdmissionBoard } from "./admission_board.ts";
import {
  createHashTimes,
  DEFAULT_MAX_WAIT_MS,
  findRetryAfter,
  INITIAL_HASH_MS,
  maxQueueFor,
} from "./admission.ts";
import { createHashWorkers, type Job, type JobInput } from "./hash_workers.ts";

export { ARGON2_OPTIONS } from "./argon2.ts";
export {
  CONTENTION_CAP,
  DEFAULT_MAX_WAIT_MS,
  HASH_TIME_WEIGHT,
  INITIAL_HASH_MS,
  maxQueueFor,
  MIN_HASH_MS,
} from "./admission.ts";
export {
  JOBS_PER_WORKER,
  MAX_CRASHES_IN_A_ROW,
  STARVATION_CHECK_MS,
  STARVATION_RELIEF_MS,
  STARVED_AFTER_MS,
} from "./hash_workers.ts";

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
  const times = createHashTimes(options.initialHashMs ?? INITIAL_HASH_MS);
  const board = createAdmissionBoard();
  const workers = createHashWorkers({
    size,
    workerUrl: options.workerUrl ?? new URL("./password_worker.ts", import.meta.url),
    starvedAfterMs: options.starvedAfterMs,
    yieldCpu: options.yieldCpu,
    onMeasured: (wallMs, cpuMs) => times.record(wallMs, cpuMs),
    onChange: publish,
  });

  /**
   * The Retry-After (seconds, before rounding) a job asked now would be refused with, or
   * `undefined` when it would be admitted: an idle worker always takes it, however slow hashes
   * have been; else admission.ts decides from the queue.
   */
  function retryAfterNow(): number | undefined {
    if (!workers.allBusy()) return undefined;
    return findRetryAfter({
      out: workers.countOut(),
      workers: size,
      hashMs: times.admitted(),
      wallMs: times.wallMs,
      maxWaitMs,
      maxQueue,
    });
  }

  /** Writes the decision for the next job to the board (after every change of the queue). */
  function publish(): void {
    const seconds = workers.broken === undefined && !workers.closed ? retryAfterNow() : undefined;
    board.publish(seconds === undefined ? undefined : Math.max(1, Math.ceil(seconds)));
  }

  function run(input: JobInput, signal?: AbortSignal): Promise<string | boolean> {
    if (workers.closed) return Promise.reject(new Error("Password hasher is closed"));
    if (workers.broken !== undefined) return Promise.reject(workers.broken);
    if (signal?.aborted) return Promise.reject(aborted());
    workers.start();
    return new Promise((resolve, reject) => {
      const retryAfter = retryAfterNow();
      if (retryAfter !== undefined) return reject(new PasswordPoolBusy(retryAfter));
      const job: Job = { input, resolve, reject };
      if (!workers.submit(job)) {
        signal?.addEventListener("abort", () => {
          if (!workers.withdraw(job)) return; // already handed to a worker: it runs to the end
          publish();
          reject(aborted());
        }, { once: true });
      }
      publish();
    });
  }

  return {
    readQueue() {
      const { cpuMs, wallMs } = times;
      return {
        out: workers.countOut(),
        hashMs: times.admitted(),
        cpuMs,
        wallMs,
        maxWaitMs,
        maxQueue,
      };
    },
    findRefusal() {
      const seconds = retryAfterNow();
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
      workers.close();
      publish();
    },
  };
}
