/**
 * Fixtures shared by the store contract's test groups.
 *
 * @module
 */
import assert from "node:assert/strict";
import { normalizeEmail } from "../../src/auth/account_rules.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import { describeSkippedEmails, toCanonicalEmail } from "../../src/store/canonical_emails.ts";
import type { AuditEntry, Store } from "../../src/store/store.ts";

/** A fresh, empty store of the backend under test. */
export interface ContractStore {
  store: Store;
  /** Runs one SQL statement on the same database, as an operator's client would. */
  execSql(sql: string): Promise<void>;
  close(): Promise<void>;
}

/** Registers one contract test (see contract.ts). */
export type ContractTest = (name: string, fn: (db: ContractStore) => Promise<void>) => void;

export const T0 = 1_000_000;
export const HOUR = 3_600_000;
export const NO_AUDIT = { audit: undefined };
/** What a deletion of user `userId` passes the store: an opaque id and the user's actor. */
export function anonymizing(userId: number, ref = `user:deleted:test${userId}`) {
  return { anonymousRef: ref, anonymousActor: `portal:user:${userId}` };
}

/** One user `a@b.org`, its key `k1`, and token `t1` issued at T0 that expires at T0 + 1 h. */
export async function seed(store: Store) {
  const user = await store.insertUser(
    { email: "a@b.org", passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    { now: T0, ...NO_AUDIT },
  );
  const key = await store.insertApiKey(
    { userId: user.id, keyHash: hashSecret("k1"), prefix: "k1", label: "" },
    { now: T0, ...NO_AUDIT },
  );
  const tokenId = await issue(store, { userId: user.id, apiKeyId: key.id }, "t1");
  return { user, key, tokenId };
}

/** Another user `email` with a key whose secret is `keyName`; no token. */
export async function seedUser(store: Store, email: string, keyName: string) {
  const user = await store.insertUser(
    { email, passwordHash: "x", tokenTimeoutSeconds: null },
    { now: T0, ...NO_AUDIT },
  );
  const key = await store.insertApiKey(
    { userId: user.id, keyHash: hashSecret(keyName), prefix: keyName, label: "" },
    { now: T0, ...NO_AUDIT },
  );
  return { user, key };
}

export function issue(
  store: Store,
  owner: { userId: number; apiKeyId: number },
  token: string,
  times: { issuedAt?: number; expiresAt?: number; maxLiveTokens?: number } = {},
): Promise<number> {
  return store.insertToken({
    tokenHash: hashSecret(token),
    ...owner,
    issuedAt: times.issuedAt ?? T0,
    expiresAt: times.expiresAt ?? T0 + HOUR,
    maxLiveTokens: times.maxLiveTokens ?? 100,
  }, NO_AUDIT);
}

export function grantOf(store: Store, token: string, key: string, now: number) {
  return store.findTokenGrant({ tokenHash: hashSecret(token), keyHash: hashSecret(key), now });
}

export function entry(action: string, subject: string, detail = {}): AuditEntry {
  return { at: T0, actor: "cli:test", action, subject, detail };
}

/** Each state alone: grant refused, status not live, not counted live, key holder refused? */
export const ALONE: [string, string, { keyRefused: boolean }][] = [
  ["key revoked", `UPDATE api_keys SET revoked_at = ${T0 + 10}`, { keyRefused: true }],
  ["key disabled", `UPDATE api_keys SET disabled_at = ${T0 + 10}`, { keyRefused: true }],
  ["key expired", `UPDATE api_keys SET expires_at = ${T0 + 10}`, { keyRefused: true }],
  ["user disabled", "UPDATE users SET disabled = 1", { keyRefused: true }],
  ["user cutoff", `UPDATE users SET tokens_valid_from = ${T0 + 1}`, { keyRefused: false }],
  ["token revoked", `UPDATE tokens SET revoked_at = ${T0 + 10}`, { keyRefused: false }],
];

/** How each state ends a token for retention: the instant retention counts from. */
export const ENDED: [string, string, number][] = [
  ["key revoked", `UPDATE api_keys SET revoked_at = ${T0 + 10}`, T0 + 10],
  ["key expired", `UPDATE api_keys SET expires_at = ${T0 + 10}`, T0 + 10],
  [
    "user cutoff",
    `UPDATE users SET tokens_valid_from = ${T0 + 1}, updated_at = ${T0 + 10}`,
    T0 + 10,
  ],
  ["token revoked", `UPDATE tokens SET revoked_at = ${T0 + 10}`, T0 + 10],
  ["token expiry", "UPDATE users SET disabled = 0", T0 + HOUR],
];

/**
 * E-mails as a keygate from before NFC normalisation may have stored them
 * (lower case in every locale, so both backends' CHECK accepts them), and
 * what the canonical_emails migration makes of each: the new e-mail, or
 * `undefined` when the row is left alone (its canonical form is another
 * user's, or the canonical form of two rows).
 */
export const PRE_NFC_EMAILS: [string, string | undefined][] = [
  ["e\u0301mile@b.org", "\u00e9mile@b.org"],
  ["caf\u00e9@b.org", undefined], // canonical already
  ["cafe\u0301@b.org", undefined], // would collide with the row above
  ["e\u0323\u0302x@b.org", undefined], // these two would both become "\u1ec7x@b.org"
  ["e\u0302\u0323x@b.org", undefined],
  ["plain@b.org", undefined],
];

/**
 * Opens (with `open`) a store whose users were written as `rows` say before
 * the canonical_emails migration, and checks what the migration did: each
 * row's e-mail, one warning naming no address, no audit entry, a login's
 * lookup found; then opens it again, which warns no more.
 */
export async function assertCanonicalEmailsMigrated(
  open: (onMigrationWarning: (line: string) => void) => Promise<Store>,
  rows: readonly [string, string | undefined][],
): Promise<void> {
  const skipped =
    rows.filter(([email, migrated]) => migrated === undefined && toCanonicalEmail(email) !== email)
      .length;
  const warnings: string[] = [];
  const store = await open((line) => warnings.push(line));
  try {
    assert.deepEqual(warnings, [describeSkippedEmails(skipped)]);
    assert.doesNotMatch(warnings[0], /@b\.org/);
    const emails = (await store.listUsers()).sort((a, b) => a.id - b.id).map((u) => u.email);
    assert.deepEqual(emails, rows.map(([email, migrated]) => migrated ?? email));
    // A login looks the address up in its canonical form, however it is typed.
    assert.equal((await store.findUserByEmail(normalizeEmail("E\u0301mile@B.org")))?.id, 1);
    assert.deepEqual(await store.listAudit(), []);
  } finally {
    await store.closeStore();
  }
  const again: string[] = [];
  await (await open((line) => again.push(line))).closeStore();
  assert.deepEqual(again, [], "the migration runs once");
}
