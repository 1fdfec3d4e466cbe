/**
 * The portal's part of `deno task timing` (issue 25, "no enumeration"): for sign-up, sign-in,
 * forgot-password and verification (a wrong code), interleaved requests for an e-mail with an
 * active account, one whose account waits for verification (pending, with a live code), one of
 * a user an operator created (no portal account) and one without any, through the real handler
 * over the store scripts/timing.ts opened (SQLite or PostgreSQL); prints each case's median and
 * each one's gap to the unknown address.
 * Fails (1) when a gap is 5 ms or more, or when the answers differ in status or body.
 *
 * @module
 */
import { createPortalThrottle } from "../src/auth/portal/portal_throttle.ts";
import { createHandler } from "../src/http/app.ts";
import type { PasswordHasher } from "../src/passwords/passwords.ts";
import { systemClock } from "../src/platform/clock.ts";
import { silentLogger } from "../src/platform/logger.ts";
import type { Store } from "../src/store/store.ts";

const OPEN = { threshold: 1e9, baseDelayMs: 1, maxDelayMs: 1, windowMs: 2 };

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** An active, a pending and an operator's address, all with `password`. */
async function seedAddresses(
  store: Store,
  hasher: PasswordHasher,
  password: string,
) {
  const clock = systemClock;
  const addresses = {
    active: "known@example.org",
    pending: "pending@example.org",
    operator: "operator@example.org",
  };
  for (const state of ["active", "pending_verification"] as const) {
    const email = state === "active" ? addresses.active : addresses.pending;
    const passwordHash = await hasher.hash(password);
    await store.insertPortalUser(
      { email, passwordHash, tokenTimeoutSeconds: null },
      {
        now: clock.now(),
        state,
        // The pending account's live verification code (a digest no guess matches).
        code: state === "active" ? undefined : {
          purpose: "verify",
          codeHash: crypto.getRandomValues(new Uint8Array(32)),
          expiresAt: clock.now() + 24 * 3_600_000,
          passwordHash,
        },
        mail: { recipient: email, subject: "-", text: "-" },
        audit: undefined,
      },
    );
  }
  await store.insertUser(
    {
      email: addresses.operator,
      passwordHash: await hasher.hash(password),
      tokenTimeoutSeconds: null,
    },
    { now: clock.now(), audit: undefined },
  );
  if ((await store.findUserByEmail(addresses.active))?.disabled !== false) {
    throw new Error("expected an active account");
  }
  return addresses;
}

/** Options of {@link measurePortalTiming}. */
export interface PortalTimingOptions {
  /** Requests of each case. */
  requests: number;
  /** The largest acceptable gap between medians, in ms. */
  maxGapMs: number;
}

/**
 * Runs the measurement on `store` (empty of the addresses it seeds; the caller opens and closes
 * it); resolves to the exit code.
 */
export async function measurePortalTiming(
  store: Store,
  hasher: PasswordHasher,
  { requests, maxGapMs }: PortalTimingOptions,
): Promise<number> {
  const clock = systemClock;
  const password = "the right passphrase";
  const addresses = await seedAddresses(store, hasher, password);
  // As --portal-secret-file: random, for this run only.
  const portalKey = crypto.getRandomValues(new Uint8Array(32));
  const handler = createHandler({
    store,
    hasher,
    clock,
    logger: silentLogger,
    defaultTimeoutSeconds: 3600,
    portal: {
      throttle: createPortalThrottle({
        store,
        clock,
        key: portalKey,
        rules: { signIn: OPEN, signInCeiling: OPEN, mail: OPEN, mailCeiling: OPEN, client: OPEN },
      }),
      mode: "open",
      codeKey: portalKey,
      origin: "https://keygate.test",
    },
  });
  let fresh = 0;
  const bodies: Record<string, (email: string) => unknown> = {
    signup: (email) => ({ email, password: "a new passphrase 1" }),
    signin: (email) => ({ email, password: "a wrong passphrase" }),
    forgot: (email) => ({ email }),
    verify: (email) => ({ email, code: "AAAAA-AAAAA", password: "a wrong passphrase" }),
  };
  const send = async (path: string, email: string) => {
    const started = performance.now();
    const response = await handler(
      new Request(`https://keygate.test/api/portal/v1/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(bodies[path](email)),
      }),
      { remoteAddr: { hostname: "192.0.2.1" } },
    );
    const text = await response.text();
    return { ms: performance.now() - started, answer: `${response.status} ${text}` };
  };
  // An unknown address stays unknown: sign-up would make it known, so each is new.
  const cases = ["active", "pending", "operator", "unknown"] as const;
  const addressOf = (path: string, which: typeof cases[number]) =>
    which !== "unknown"
      ? addresses[which]
      : path === "signup"
      ? `nobody-${fresh++}@example.org`
      : "nobody@example.org";

  for (let i = 0; i < 5; i++) {
    for (const path of Object.keys(bodies)) {
      for (const which of cases) await send(path, addressOf(path, which));
    }
  }
  let failed = false;
  console.log("portal case          requests  median ms");
  for (const path of Object.keys(bodies)) {
    const times = Object.fromEntries(cases.map((which) => [which, [] as number[]]));
    const answers = new Set<string>();
    for (let i = 0; i < requests; i++) {
      // Each round in a random order, so that drift and caches favour no case.
      const order = [...cases];
      for (let j = order.length - 1; j > 0; j--) {
        const k = crypto.getRandomValues(new Uint32Array(1))[0] % (j + 1);
        [order[j], order[k]] = [order[k], order[j]];
      }
      for (const which of order) {
        const { ms, answer } = await send(path, addressOf(path, which));
        times[which].push(ms);
        answers.add(answer);
      }
    }
    for (const which of cases) {
      console.log(
        `${`${path} ${which}`.padEnd(20)}${String(requests).padStart(9)}${
          median(times[which]).toFixed(2).padStart(11)
        }`,
      );
    }
    const same = answers.size === 1;
    for (const which of cases.filter((which) => which !== "unknown")) {
      const gap = Math.abs(median(times[which]) - median(times.unknown));
      console.log(
        `median gap, ${path} ${which} vs unknown: ${gap.toFixed(3)} ms (limit ${maxGapMs} ms): ` +
          `${gap < maxGapMs ? "ok" : "FAILED"}`,
      );
      if (!(gap < maxGapMs)) failed = true;
    }
    console.log(
      `answers, ${path}: ${same ? "identical" : `DIFFER: ${[...answers].join(" | ")}`}`,
    );
    if (!same) failed = true;
  }
  return failed ? 1 : 0;
}
