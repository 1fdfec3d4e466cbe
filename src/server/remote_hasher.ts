/**
 * One password pool for every request worker: a worker's
 * {@link PasswordHasher} posts each job to the main thread, which runs it on
 * the process's one pool (so N workers never multiply argon2's threads or
 * memory) and posts the answer back. A request's abort signal crosses too, so
 * a job whose client left is still dropped from the queue. Admission is the
 * main thread's pool's, by the same expected-wait bound for every worker: a
 * refusal crosses with the Retry-After that pool computed.
 *
 * The pool's decision for the next check also reaches the worker in shared
 * memory (src/passwords/admission_board.ts, sent once when the worker is
 * wired up), so the worker's login flow refuses a login the pool would refuse
 * without a message to the main thread and before its database read
 * ({@link PasswordHasher.findRefusal}).
 *
 * @module
 */
import { createAdmissionReader } from "../passwords/admission_board.ts";
import {
  PasswordCheckAborted,
  type PasswordHasher,
  PasswordPoolBusy,
} from "../passwords/passwords.ts";
import { toErrorText } from "../platform/logger.ts";

/** A job, worker → main thread. */
export type PasswordRequest =
  | { kind: "password"; id: number; op: "hash"; password: string }
  | { kind: "password"; id: number; op: "verify"; passwordHash?: string; password: string }
  | { kind: "password-abort"; id: number };

/** Its answer, main thread → worker. */
export type PasswordAnswer =
  /** Sent once, first: the pool's admission board. */
  | { kind: "password-admission"; buffer: SharedArrayBuffer }
  | { kind: "password-result"; id: number; value: string | boolean }
  | {
    kind: "password-error";
    id: number;
    error: "aborted" | "busy" | "failed";
    message: string;
    /** With "busy": the pool's computed Retry-After. */
    retryAfterSeconds?: number;
  };

/** Where messages go: a worker's `self`, or the main thread's `Worker`. */
export interface MessagePort {
  postMessage(message: unknown): void;
}

/** The worker's side: a hasher whose jobs run in the main thread's pool. */
export function createRemoteHasher(port: MessagePort): PasswordHasher & {
  /** Call with every {@link PasswordAnswer} the worker receives. */
  receive(answer: PasswordAnswer): void;
  findRefusal(): number | undefined;
} {
  let nextId = 1;
  let closed = false;
  let readAdmission: (() => number | undefined) | undefined;
  const pending = new Map<
    number,
    { resolve(value: string | boolean): void; reject(e: Error): void }
  >();

  function run(
    job: { op: "hash"; password: string } | {
      op: "verify";
      passwordHash?: string;
      password: string;
    },
    signal?: AbortSignal,
  ): Promise<string | boolean> {
    if (closed) return Promise.reject(new Error("Password hasher is closed"));
    if (signal?.aborted) return Promise.reject(new PasswordCheckAborted());
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      port.postMessage({ kind: "password", id, ...job } as PasswordRequest);
      signal?.addEventListener("abort", () => {
        if (pending.has(id)) port.postMessage({ kind: "password-abort", id } as PasswordRequest);
      }, { once: true });
    });
  }

  return {
    async hash(password) {
      return await run({ op: "hash", password }) as string;
    },
    async verify(passwordHash, password, signal) {
      return await run({ op: "verify", passwordHash, password }, signal) as boolean;
    },
    findRefusal() {
      return closed ? undefined : readAdmission?.();
    },
    close() {
      closed = true;
      for (const job of pending.values()) job.reject(new Error("Password hasher is closed"));
      pending.clear();
    },
    receive(answer) {
      if (answer.kind === "password-admission") {
        readAdmission = createAdmissionReader(answer.buffer);
        return;
      }
      const job = pending.get(answer.id);
      if (job === undefined) return;
      pending.delete(answer.id);
      if (answer.kind === "password-result") job.resolve(answer.value);
      else if (answer.error === "aborted") job.reject(new PasswordCheckAborted());
      else if (answer.error === "busy") {
        job.reject(new PasswordPoolBusy(answer.retryAfterSeconds ?? 1));
      } else job.reject(new Error(answer.message));
    },
  };
}

/**
 * The main thread's side for one worker: runs its jobs on `hasher`. Returns the handler for the
 * worker's {@link PasswordRequest} messages, and a function that drops its jobs (when it dies).
 */
export function servePasswordRequests(hasher: PasswordHasher, worker: MessagePort): {
  receive(request: PasswordRequest): void;
  abandon(): void;
} {
  const running = new Map<number, AbortController>();
  if (hasher.admissionBuffer !== undefined) {
    // Shared memory crosses to the worker as itself, not a copy.
    worker.postMessage(
      { kind: "password-admission", buffer: hasher.admissionBuffer } as PasswordAnswer,
    );
  }
  return {
    receive(request) {
      if (request.kind === "password-abort") {
        running.get(request.id)?.abort();
        return;
      }
      const controller = new AbortController();
      running.set(request.id, controller);
      const job = request.op === "hash"
        ? hasher.hash(request.password)
        : hasher.verify(request.passwordHash, request.password, controller.signal);
      job.then(
        (value) => {
          if (running.delete(request.id)) {
            worker.postMessage(
              { kind: "password-result", id: request.id, value } as PasswordAnswer,
            );
          }
        },
        (error) => {
          if (!running.delete(request.id)) return;
          const kind = error instanceof PasswordCheckAborted
            ? "aborted"
            : error instanceof PasswordPoolBusy
            ? "busy"
            : "failed";
          worker.postMessage({
            kind: "password-error",
            id: request.id,
            error: kind,
            message: toErrorText(error),
            retryAfterSeconds: error instanceof PasswordPoolBusy
              ? error.retryAfterSeconds
              : undefined,
          } as PasswordAnswer);
        },
      );
    },
    abandon() {
      for (const controller of running.values()) controller.abort();
      running.clear();
    },
  };
}
