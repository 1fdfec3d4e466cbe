/**
 * What the domain's unit tests share: a fresh store of the backend under test
 * (`KEYGATE_TEST_STORE`, as the store contract's suite), the fake clock, one
 * real password hasher that counts its hashes, and change dependencies that
 * keep the audit entries they were told of.
 */
import type { ChangeDeps } from "../../src/auth/changes.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import { createKey } from "../../src/auth/keys.ts";
import { type AccountDeps, addUser } from "../../src/auth/users.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import type { ApiKey, AuditEntry, User } from "../../src/store/store.ts";
import { createFakeClock, type FakeClock } from "../_helpers/fake_clock.ts";
import { openTestStore, type TestStore } from "../_helpers/store.ts";

/** One argon2id worker for every domain test of the process. */
const hasher = createPasswordHasher({ workers: 1 });

/** A domain test's surroundings; `await using` closes the store. */
export interface DomainFixture extends AsyncDisposable {
  test: TestStore;
  clock: FakeClock;
  /** {@link ChangeDeps} by `cli:tester`, with the hasher. */
  deps: AccountDeps;
  /** The audit entries the changes reported after their commits. */
  noted: AuditEntry[];
  /** How many passwords were hashed since the fixture opened. */
  hashes(): number;
  verify(hash: string, password: string): Promise<boolean>;
  /** Adds a user through the use case. */
  addUser(email: string, password?: string): Promise<User>;
  /** Creates a key of `user` through the use case. */
  addKey(user: User): Promise<ApiKey>;
  /** Stores a token of `user` issued now with `key`, valid for an hour; resolves to its id. */
  addToken(user: User, key: ApiKey, secret?: string): Promise<number>;
}

/** Opens a fixture on a fresh store. */
export async function openDomainFixture(): Promise<DomainFixture> {
  const test = await openTestStore();
  const clock = createFakeClock();
  const noted: AuditEntry[] = [];
  let hashes = 0;
  let tokens = 0;
  const changes: ChangeDeps = {
    store: test.store,
    clock,
    actor: "cli:tester",
    noteChange: (entry) => noted.push(entry),
  };
  const deps: AccountDeps = {
    ...changes,
    hasher: {
      hash(password) {
        hashes++;
        return hasher.hash(password);
      },
    },
  };
  return {
    test,
    clock,
    deps,
    noted,
    hashes: () => hashes,
    verify: (hash, password) => hasher.verify(hash, password),
    addUser: (email, password = "correct horse") =>
      addUser(deps, { email, password, tokenTimeoutSeconds: null }),
    addKey: async (user) => (await createKey(changes, user)).key,
    addToken: (user, key, secret) =>
      test.store.insertToken({
        tokenHash: hashSecret(secret ?? `token-${++tokens}`.padEnd(40, "x")),
        userId: user.id,
        apiKeyId: key.id,
        issuedAt: clock.now(),
        expiresAt: clock.now() + 3600_000,
        maxLiveTokens: 100,
      }, { audit: undefined }),
    [Symbol.asyncDispose]: () => test.close(),
  };
}
