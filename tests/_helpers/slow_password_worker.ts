/**
 * A password worker that takes a second per job before doing it as the real
 * one does, so that a test can fill the pool's queue before any job ends
 * (however slowly the store lets its requests reach the pool).
 */
import { hashArgon2, verifyArgon2 } from "../../src/passwords/argon2.ts";
import type { PasswordJob, PasswordResult } from "../../src/passwords/password_worker.ts";

const scope = globalThis as unknown as {
  onmessage: ((event: MessageEvent<PasswordJob>) => void) | null;
  postMessage(message: PasswordResult): void;
};
const jobs: PasswordJob[] = [];
let busy = false;

/** One job at a time, in order, like the real worker's thread. */
async function work(): Promise<void> {
  busy = true;
  for (let job = jobs.shift(); job !== undefined; job = jobs.shift()) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const value = job.op === "hash"
      ? hashArgon2(job.password)
      : verifyArgon2(job.passwordHash, job.password);
    scope.postMessage({ id: job.id, ok: true, value });
  }
  busy = false;
}

scope.onmessage = (event) => {
  jobs.push(event.data);
  if (!busy) work();
};
