/**
 * The password pool's admission decision in shared memory, so that request
 * workers (`--workers N`) refuse a login the pool would refuse without a
 * round trip to the main thread: one 32-bit cell, 0 while a check asked now
 * would be admitted, else the Retry-After (whole seconds) it would be refused
 * with. The pool writes it after every change of its queue or its hash-time
 * estimate (src/passwords/passwords.ts); readers only load it.
 *
 * A reader may see a decision a few microseconds old: a login it admits is
 * still checked by the pool itself, which may refuse it then, and one it
 * refuses would have been refused an instant earlier. Either way the answer
 * is the one the pool gives.
 *
 * @module
 */

/** The writer's side. */
export interface AdmissionBoard {
  /** The shared memory, to send to request workers. */
  readonly buffer: SharedArrayBuffer;
  /** Publishes the decision: `undefined` admits; a number refuses with that Retry-After. */
  publish(retryAfterSeconds: number | undefined): void;
}

/** Creates a board that admits until the first refusal is published. */
export function createAdmissionBoard(): AdmissionBoard {
  const buffer = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
  const cell = new Int32Array(buffer);
  return {
    buffer,
    publish(retryAfterSeconds) {
      Atomics.store(cell, 0, retryAfterSeconds === undefined ? 0 : Math.max(1, retryAfterSeconds));
    },
  };
}

/**
 * A reader of the board in `buffer`: each call returns the Retry-After a check asked now would be
 * refused with, or `undefined` while the pool admits.
 */
export function createAdmissionReader(buffer: SharedArrayBuffer): () => number | undefined {
  const cell = new Int32Array(buffer);
  return () => {
    const seconds = Atomics.load(cell, 0);
    return seconds > 0 ? seconds : undefined;
  };
}
