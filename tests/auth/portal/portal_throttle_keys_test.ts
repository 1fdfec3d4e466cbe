/**
 * The portal throttle's counters name an address only by an HMAC keyed with the portal secret
 * (so whoever reads the database cannot test a guessed address against them), and a deleted
 * account's counters go with it, of every client and network. Both backends
 * (`KEYGATE_TEST_STORE`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../../src/auth/credentials.ts";
import { deleteOwnAccount } from "../../../src/auth/portal/own_account.ts";
import { createPortalThrottle } from "../../../src/auth/portal/portal_throttle.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { openTestStore, TEST_STORE_NAME } from "../../_helpers/store.ts";

const hasher = createPasswordHasher({ workers: 1 });
const KEY = new Uint8Array(32).fill(3);
const OTHER_KEY = new Uint8Array(32).fill(4);
const EMAIL = "owner@example.org";
const PASSWORD = "correct horse battery staple 7";
const options = { sanitizeResources: false, sanitizeOps: false };

/** The digest the counters used before they were keyed: anyone could compute it. */
function unkeyedDigest(email: string): string {
  return Buffer.from(hashSecret(`portal:${email}`)).toString("hex").slice(0, 32);
}

Deno.test({
  name: `[${TEST_STORE_NAME}] portal throttle counters name the address by a keyed digest only`,
  ...options,
  async fn() {
    await using opened = await openTestStore();
    const { store } = opened;
    const clock = createFakeClock();
    const throttle = createPortalThrottle({ store, clock, key: KEY });
    await throttle.succeeded("198.51.100.7", EMAIL);
    await throttle.count("signIn", "192.0.2.1", EMAIL);
    await throttle.count("mail", "192.0.2.1", EMAIL);
    const subjects = (await store.listLoginFailures(clock.now())).map((row) => row.subject)
      .filter((subject) => subject !== "portal-client:192.0.2.1");
    assert.equal(subjects.length, 5, subjects.join(" "));
    for (const subject of subjects) {
      assert.ok(!subject.includes(unkeyedDigest(EMAIL)), subject);
      assert.ok(!subject.includes(EMAIL), subject);
      assert.ok(
        throttle.countersOf(EMAIL).some((prefix) => subject.startsWith(prefix)),
        `${subject} is one of the address's counters`,
      );
    }
    // Another key (another deployment, or a guesser without the secret) finds none of them.
    const guesser = createPortalThrottle({ store, clock, key: OTHER_KEY });
    assert.deepEqual(
      subjects.filter((subject) =>
        guesser.countersOf(EMAIL).some((prefix) => subject.startsWith(prefix))
      ),
      [],
    );
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] deleting one's own account forgets the address's portal counters`,
  ...options,
  async fn() {
    await using opened = await openTestStore();
    const { store } = opened;
    const clock = createFakeClock();
    const throttle = createPortalThrottle({ store, clock, key: KEY });
    const user = await store.insertPortalUser(
      { email: EMAIL, passwordHash: await hasher.hash(PASSWORD), tokenTimeoutSeconds: null },
      {
        now: clock.now(),
        state: "active",
        mail: { recipient: EMAIL, subject: "Welcome", text: "x" },
        audit: undefined,
      },
    );
    for (const address of ["198.51.100.7", "2001:db8:5:6::1"]) {
      await throttle.succeeded(address, EMAIL);
    }
    await throttle.count("signIn", "192.0.2.1", EMAIL);
    await throttle.count("mail", "203.0.113.9", EMAIL);
    await throttle.count("signIn", "192.0.2.1", "other@example.org");
    const before = await store.listLoginFailures(clock.now());
    const ofOwner = (subject: string) =>
      throttle.countersOf(EMAIL).some((prefix) => subject.startsWith(prefix));
    // Two known clients, a sign-in pair and its ceiling, a mail pair and its ceiling.
    assert.equal(before.filter((row) => ofOwner(row.subject)).length, 6);

    await deleteOwnAccount(
      { store, clock, hasher, throttle, codeKey: KEY },
      { address: "198.51.100.7", links: { origin: "https://portal.example.org" } },
      user,
      { password: PASSWORD },
    );

    const after = await store.listLoginFailures(clock.now());
    assert.deepEqual(after.filter((row) => ofOwner(row.subject)), []);
    // Another address's counters and the clients' own stay.
    assert.deepEqual(
      after.map((row) => row.subject).toSorted(),
      before.map((row) => row.subject).filter((subject) => !ofOwner(subject)).toSorted(),
    );
    assert.ok(after.some((row) => row.subject === "portal-client:192.0.2.1"));
    assert.equal(await store.findUserById(user.id), undefined);
  },
});
