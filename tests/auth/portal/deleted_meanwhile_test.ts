/**
 * A portal request whose user is deleted after the domain read it and before its write reaches
 * the store (the race held open by a store wrapper that deletes the user just before the
 * write): the store refuses the write (tests/store/contract_portal_late.ts) and the domain
 * answers as it would for an unknown address, so neither an error (500) nor a different answer
 * says the address was known, and nothing naming the address is written. Both backends
 * (`KEYGATE_TEST_STORE`).
 *
 * @module
 */
import assert from "node:assert/strict";
import type { PortalAccountDeps } from "../../../src/auth/portal/account_deps.ts";
import { signUp, verifyEmail } from "../../../src/auth/portal/accounts.ts";
import { requestEmailChange } from "../../../src/auth/portal/own_account.ts";
import { requestPasswordReset, resetPassword } from "../../../src/auth/portal/password_reset.ts";
import { createPortalThrottle } from "../../../src/auth/portal/portal_throttle.ts";
import { signIn } from "../../../src/auth/portal/sessions.ts";
import { AuthError } from "../../../src/auth/errors.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import type { Store } from "../../../src/store/store.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { openTestStore, TEST_STORE_NAME } from "../../_helpers/store.ts";
import { changingBefore } from "../../_helpers/store_before.ts";

const hasher = createPasswordHasher({ workers: 1 });
const KEY = new Uint8Array(32).fill(7);
const PASSWORD = "correct horse battery staple 7";
const EMAIL = "gone@example.org";
const CLIENT = { address: "198.51.100.7", links: { origin: "https://portal.example.org" } };

/** `store`, but `method` first deletes user `userId` (as a deletion committing just then). */
function deletingBefore(store: Store, method: keyof Store, userId: () => number): Store {
  return changingBefore(store, method, (target) => {
    const ref = `user:deleted:gone${userId()}`;
    return target.deleteUser(userId(), {
      now: 1,
      anonymousRef: ref,
      anonymousActor: `portal:user:${userId()}`,
      audit: { at: 1, actor: "cli:test", action: "user.deleted", subject: ref, detail: {} },
    });
  });
}

async function rig(state: "active" | "pending_verification") {
  const db = await openTestStore();
  const clock = createFakeClock();
  const user = await db.store.insertPortalUser(
    { email: EMAIL, passwordHash: await hasher.hash(PASSWORD), tokenTimeoutSeconds: null },
    {
      now: clock.now(),
      state,
      mail: { recipient: EMAIL, subject: "Welcome", text: "x" },
      audit: undefined,
    },
  );
  const deps = (method: keyof Store): PortalAccountDeps => {
    const store = deletingBefore(db.store, method, () => user.id);
    return {
      store,
      clock,
      hasher,
      throttle: createPortalThrottle({ store, clock, key: KEY }),
      mode: "open",
      codeKey: KEY,
    };
  };
  return { db, deps, user };
}

/**
 * Nothing written names the address, no mail waits (the deletion took the welcome mail, and
 * nothing was queued after it), the user is gone.
 */
async function assertNothingLeft(store: Store, userId: number) {
  const audit = await store.listAudit();
  assert.deepEqual(audit.filter((row) => JSON.stringify(row).includes(EMAIL)), []);
  assert.equal((await store.countMail()).pending, 0, "no mail queued");
  assert.equal(await store.findUserById(userId), undefined);
  assert.deepEqual(await store.findPortalCodes(userId, "verify", Date.now() * 2), []);
}

const options = { sanitizeResources: false, sanitizeOps: false };

Deno.test({
  name:
    `[${TEST_STORE_NAME}] a repeated sign-up of a user deleted meanwhile answers as any sign-up`,
  ...options,
  async fn() {
    const { db, deps, user } = await rig("pending_verification");
    await using _ = db;
    await signUp(deps("addPortalCode"), CLIENT, { email: EMAIL, password: PASSWORD });
    await assertNothingLeft(db.store, user.id);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] forgot-password for a user deleted meanwhile answers as any address`,
  ...options,
  async fn() {
    const { db, deps, user } = await rig("active");
    await using _ = db;
    await requestPasswordReset(deps("replacePortalCode"), CLIENT, { email: EMAIL });
    await assertNothingLeft(db.store, user.id);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] a sign-in of a user deleted meanwhile is the one invalid_credentials`,
  ...options,
  async fn() {
    const { db, deps, user } = await rig("active");
    await using _ = db;
    const unknown = await signIn(deps("insertPortalSession"), CLIENT, {
      email: "nobody@example.org",
      password: PASSWORD,
    }).catch((error) => error);
    assert.ok(unknown instanceof AuthError, String(unknown));
    const late = await signIn(deps("insertPortalSession"), CLIENT, {
      email: EMAIL,
      password: PASSWORD,
    }).catch((error) => error);
    assert.ok(late instanceof AuthError, String(late));
    assert.equal(late.code, "invalid_credentials");
    assert.equal(late.code, unknown.code);
    assert.equal(late.message, unknown.message);
    assert.deepEqual((await db.store.listAudit()).map((row) => [row.action, row.subject]), [
      ["portal.sign_in_failed", "user:unknown"],
      ["user.deleted", `user:deleted:gone${user.id}`],
    ]);
    await assertNothingLeft(db.store, user.id);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] a sign-up whose address another takes and frees meanwhile retries`,
  ...options,
  async fn() {
    const { db, deps } = await rig("active");
    await using _ = db;
    const fresh = "fresh@example.org";
    let raced = false;
    // The first insert meets another request's user (committed just before), which is
    // deleted again before the sign-up reads the address back.
    const store = new Proxy(db.store, {
      get(target, name) {
        const value = Reflect.get(target, name, target);
        if (typeof value !== "function") return value;
        if (name !== "insertPortalUser" || raced) return value.bind(target);
        return async (...args: Parameters<Store["insertPortalUser"]>) => {
          raced = true;
          const other = await target.insertUser(
            { email: fresh, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
            { now: 1, audit: undefined },
          );
          const error = await target.insertPortalUser(...args).then(() => undefined, (e) => e);
          await target.deleteUser(other.id, {
            now: 1,
            anonymousRef: `user:deleted:other${other.id}`,
            anonymousActor: `portal:user:${other.id}`,
            audit: undefined,
          });
          throw error;
        };
      },
    });
    await signUp({ ...deps("listAudit"), store }, CLIENT, { email: fresh, password: PASSWORD });
    assert.ok(raced);
    const user = await db.store.findUserByEmail(fresh);
    assert.ok(user !== undefined, "signed up on the second try");
    assert.equal((await db.store.findPortalAccount(user.id))?.state, "pending_verification");
    assert.equal((await db.store.findPortalCodes(user.id, "verify", 2)).length, 1);
    assert.equal((await db.store.countMail()).pending, 2, "the welcome mail and the code");
  },
});

/** What `promise` rejects with, an {@link AuthError}. */
async function refusal(promise: Promise<unknown>): Promise<AuthError> {
  const error = await promise.then(() => undefined, (error) => error);
  assert.ok(error instanceof AuthError, String(error));
  return error;
}

Deno.test({
  name:
    `[${TEST_STORE_NAME}] a failed sign-in of a user deleted meanwhile writes nothing naming it`,
  ...options,
  async fn() {
    const { db, deps, user } = await rig("active");
    await using _ = db;
    const wrong = { email: EMAIL, password: "not the password 1" };
    const late = await refusal(signIn(deps("appendAudit"), CLIENT, wrong));
    const unknown = await refusal(
      signIn(deps("listAudit"), CLIENT, { ...wrong, email: "nobody@example.org" }),
    );
    assert.deepEqual([late.code, late.message], [unknown.code, unknown.message]);
    await assertNothingLeft(db.store, user.id);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] a repeated sign-up of an active user deleted meanwhile mails nothing`,
  ...options,
  async fn() {
    const { db, deps, user } = await rig("active");
    await using _ = db;
    await signUp(deps("insertMail"), CLIENT, { email: EMAIL, password: PASSWORD });
    await assertNothingLeft(db.store, user.id);
  },
});

Deno.test({
  name:
    `[${TEST_STORE_NAME}] a wrong verification code of a user deleted meanwhile is refused alike`,
  ...options,
  async fn() {
    const { db, deps, user } = await rig("pending_verification");
    await using _ = db;
    const input = { email: EMAIL, code: "AAAAA-AAAAA", password: PASSWORD };
    const late = await refusal(verifyEmail(deps("appendAudit"), CLIENT, input));
    const unknown = await refusal(
      verifyEmail(deps("listAudit"), CLIENT, { ...input, email: "nobody@example.org" }),
    );
    assert.deepEqual([late.code, late.message], [unknown.code, unknown.message]);
    await assertNothingLeft(db.store, user.id);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] a wrong reset code of a user deleted meanwhile is refused alike`,
  ...options,
  async fn() {
    const { db, deps, user } = await rig("active");
    await using _ = db;
    await requestPasswordReset(deps("listAudit"), CLIENT, { email: EMAIL });
    const input = { email: EMAIL, code: "AAAAA-AAAAA", password: "a new password 77" };
    const late = await refusal(resetPassword(deps("recordPortalCodeAttempt"), CLIENT, input));
    const unknown = await refusal(
      resetPassword(deps("listAudit"), CLIENT, { ...input, email: "nobody@example.org" }),
    );
    assert.deepEqual([late.code, late.message], [unknown.code, unknown.message]);
    await assertNothingLeft(db.store, user.id);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] an e-mail change to a taken address by a user deleted meanwhile`,
  ...options,
  async fn() {
    const { db, deps, user } = await rig("active");
    await using _ = db;
    await db.store.insertUser(
      { email: "taken@example.org", passwordHash: "$argon2id$t", tokenTimeoutSeconds: null },
      { now: 1, audit: undefined },
    );
    const late = await refusal(
      requestEmailChange(deps("appendAudit"), CLIENT, user, {
        email: "taken@example.org",
        password: PASSWORD,
      }),
    );
    // As the other branch (a free address) answers its own deletion.
    assert.deepEqual([late.code, late.message], ["conflict", "Your account was deleted meanwhile"]);
    await assertNothingLeft(db.store, user.id);
  },
});
