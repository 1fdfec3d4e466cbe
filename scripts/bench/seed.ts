/**
 * Seeds a benchmark database through the store: one user and one API key per
 * 100 tokens (the per-key live-token cap, or fewer if asked), all sharing one password hash.
 *
 * @module
 */
import {
  generateApiKey,
  generateToken,
  hashSecret,
  toKeyPrefix,
} from "../../src/auth/credentials.ts";
import { MAX_LIVE_TOKENS } from "../../src/auth/login.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";

/** A key, a token issued with it, and the key owner's e-mail. */
export interface SeedEntry {
  apiKey: string;
  token: string;
  email: string;
}

/** The password of every seeded user. */
export const BENCH_PASSWORD = "bench password";

/** What {@link seedDatabase} made: sampled secure-request credentials and login-only users. */
export interface Seeded {
  sample: SeedEntry[];
  /**
   * Users with a key and no tokens, for issuance runs (their logins revoke no sampled token).
   * The first one's key may also introspect tokens.
   */
  issuers: SeedEntry[];
}

/**
 * Creates `tokens` live tokens (valid for a day) in a new database at `path`
 * and returns `sample` of them, spread across users, plus `issuers` users
 * with a key and no token.
 */
export async function seedDatabase(
  path: string,
  options: {
    tokens: number;
    sample: number;
    issuers?: number;
    passwordHash: string;
    /** Which tokens (numbered from 0 in seeding order) to sample, instead of every n-th. */
    select?: (index: number) => boolean;
    /** Tokens per user (and key); the per-key live-token cap unless given. */
    tokensPerUser?: number;
  },
): Promise<Seeded> {
  const store = openSqliteStore(path);
  const now = Date.now();
  const perUser = Math.min(options.tokensPerUser ?? MAX_LIVE_TOKENS, MAX_LIVE_TOKENS);
  const users = Math.ceil(options.tokens / perUser);
  const every = Math.max(1, Math.floor(options.tokens / options.sample));
  const sample: SeedEntry[] = [];
  let made = 0;
  try {
    for (let first = 0; first < users; first += 1000) {
      await store.sqlite.runBulkTransaction(async () => {
        for (let u = first; u < Math.min(users, first + 1000); u++) {
          const email = `bench${u}@example.org`;
          const user = await store.insertUser(
            { email, passwordHash: options.passwordHash, tokenTimeoutSeconds: null },
            { now, audit: undefined },
          );
          const apiKey = generateApiKey();
          const key = await store.insertApiKey(
            {
              userId: user.id,
              keyHash: hashSecret(apiKey),
              prefix: toKeyPrefix(apiKey),
              label: "",
            },
            { now, audit: undefined },
          );
          for (let t = 0; t < perUser && made < options.tokens; t++, made++) {
            const token = generateToken();
            await store.insertToken({
              tokenHash: hashSecret(token),
              userId: user.id,
              apiKeyId: key.id,
              issuedAt: now + t,
              expiresAt: now + 86_400_000,
              maxLiveTokens: MAX_LIVE_TOKENS,
            }, { audit: undefined });
            const chosen = options.select === undefined
              ? made % every === 0 && sample.length < options.sample
              : options.select(made);
            if (chosen) {
              sample.push({ apiKey, token, email });
            }
          }
        }
      });
    }
    const issuers: SeedEntry[] = [];
    await store.sqlite.runBulkTransaction(async () => {
      for (let i = 0; i < (options.issuers ?? 100); i++) {
        const email = `issuer${i}@example.org`;
        const user = await store.insertUser(
          { email, passwordHash: options.passwordHash, tokenTimeoutSeconds: null },
          { now, audit: undefined },
        );
        const apiKey = generateApiKey();
        // The first issuer's key is also a resource-server key, for the introspection runs.
        await store.insertApiKey(
          {
            userId: user.id,
            keyHash: hashSecret(apiKey),
            prefix: toKeyPrefix(apiKey),
            label: "",
            introspect: i === 0,
          },
          { now, audit: undefined },
        );
        issuers.push({ apiKey, token: "-", email });
      }
    });
    return { sample, issuers };
  } finally {
    await store.closeStore();
  }
}
