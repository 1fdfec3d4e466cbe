/**
 * The production mix's traffic besides wrk's load (scripts/bench/production_mix.ts): the
 * revoker that ends other users' grants through instance B at a steady rate, the steady logins
 * on A, and the probe that times a revocation on B to A's first refusal. All run in the bench's
 * own process until told to stop.
 *
 * @module
 */
import type { SeedEntry } from "./seed.ts";

/** Logins on A during every run. */
export const LOGINS_PER_SECOND = 2;
/** Revocation requests in flight at most (the revoker falls behind rather than piling up). */
export const MAX_OUTSTANDING = 32;
/**
 * HTTP clients the revoker spreads its requests over, in turn. One `Deno.HttpClient` kept its
 * requests to B on about one connection, one at a time: B idled at about 220 revocations a
 * second, however many were in flight; eight reach the rates asked.
 */
export const REVOKER_CLIENTS = 8;
const SECURE = "/api/secure/userservice/tokens/current";

/** A seeded user whose grants A's load never uses: its key, some of its tokens, its ids. */
export interface Victim {
  apiKey: string;
  tokens: string[];
  userId: number;
  keyId: number;
}

/** One grant-ending write: a token's revocation, a key rotation or a user's revoke-all. */
export interface Revocation {
  victim: Victim;
  kind: "token" | "rotate" | "user";
  token?: string;
}

/** Tokens of each victim user sampled (of its 100). */
export const VICTIM_TOKENS = 10;

/** Users whose writes are interleaved: two writes to one user are this many apart. */
const INTERLEAVED_USERS = 64;

/**
 * The grant-ending writes of the mix: for each user some of its tokens revoked one by one, then
 * its key rotated, then all its tokens revoked; interleaved over {@link INTERLEAVED_USERS} users,
 * so that the revoker's concurrent requests never race on one user (a token's revocation
 * answered after its user's revoke-all would be a 401, not a failure of B).
 */
export function* listRevocations(
  users: Victim[],
): Generator<Revocation> {
  for (let from = 0; from < users.length; from += INTERLEAVED_USERS) {
    const group = users.slice(from, from + INTERLEAVED_USERS);
    for (let i = 0; i < VICTIM_TOKENS; i++) {
      for (const victim of group) {
        const token = victim.tokens[i];
        if (token !== undefined) yield { victim, kind: "token", token };
      }
    }
    for (const victim of group) yield { victim, kind: "rotate" };
    for (const victim of group) yield { victim, kind: "user" };
  }
}

/** What the revoker did: writes answered 2xx, the others by status, and whether it ran dry. */
export interface RevokerResult {
  done: number;
  /** The writes answered 2xx, by kind. */
  kinds: Record<Revocation["kind"], number>;
  failed: number;
  /** Failures by status (`network` for no answer). */
  failures: Record<string, number>;
  /** Whether the list of revocations ran out before the run ended. */
  ranOut: boolean;
  /** Seconds from the first request due to the stop. */
  seconds: number;
  /** Milliseconds from sending to B's answer, summed over the writes answered. */
  answerMs: number;
  /**
   * Requests due by the stop but never sent: the revoker waited for B's answers, its
   * {@link MAX_OUTSTANDING} requests all in flight (B, or the core it shares, is the limit).
   */
  unsent: number;
}

/** Ends other users' grants through B at `rate` per second until told to stop. */
export async function revoke(
  options: Omit<RevokerOptions, "client"> & {
    /** Clients to send through, in turn (see {@link REVOKER_CLIENTS}). */
    clients: Deno.HttpClient[];
    rate: number;
    stop: { now: boolean };
    revocations: Generator<Revocation>;
  },
): Promise<RevokerResult> {
  const result: RevokerResult = {
    done: 0,
    kinds: { token: 0, rotate: 0, user: 0 },
    failed: 0,
    failures: {},
    ranOut: false,
    seconds: 0,
    answerMs: 0,
    unsent: 0,
  };
  const fail = (reason: string) => {
    result.failed++;
    result.failures[reason] = (result.failures[reason] ?? 0) + 1;
  };
  let [outstanding, sent] = [0, 0];
  if (options.rate <= 0) {
    while (!options.stop.now) await sleep(50);
    return result;
  }
  let turn = 0;
  const one = async (revocation: Revocation) => {
    const client = options.clients[turn++ % options.clients.length];
    const sentAt = performance.now();
    const response = await sendRevocation({ ...options, client }, revocation);
    await response.arrayBuffer();
    result.answerMs += performance.now() - sentAt;
    if (response.ok) {
      result.done++;
      result.kinds[revocation.kind]++;
    } else fail(String(response.status));
  };
  const started = performance.now();
  const running = new Set<Promise<void>>();
  while (!options.stop.now && !result.ranOut) {
    const due = Math.floor((performance.now() - started) / 1000 * options.rate);
    while (sent < due && outstanding < MAX_OUTSTANDING) {
      const next = options.revocations.next();
      if (next.done) {
        result.ranOut = true;
        break;
      }
      const job = one(next.value).catch(() => fail("network")).finally(() => {
        outstanding--;
        running.delete(job);
      });
      running.add(job);
      outstanding++;
      sent++;
    }
    await sleep(Math.max(1, 1000 / options.rate / 2));
  }
  result.seconds = (performance.now() - started) / 1000;
  if (!result.ranOut) {
    result.unsent = Math.max(0, Math.floor(result.seconds * options.rate) - sent);
  }
  while (!options.stop.now) await sleep(50);
  await Promise.all(running);
  return result;
}

/** Where and as whom the revoker sends. */
interface RevokerOptions {
  client: Deno.HttpClient;
  /** Instance B's API origin, and its admin listener's. */
  b: string;
  adminOrigin: string;
  /** A write operator's token for the admin API. */
  operator: string;
}

/** One grant-ending write through B: a token's own DELETE, or the admin API's rotate/revoke-all. */
function sendRevocation(
  options: RevokerOptions,
  { victim, kind, token }: Revocation,
): Promise<Response> {
  const admin = {
    Authorization: `Bearer ${options.operator}`,
    "Content-Type": "application/json",
  };
  switch (kind) {
    case "token":
      return fetch(`${options.b}${SECURE}?api_key=${victim.apiKey}&api_token=${token}`, {
        method: "DELETE",
        client: options.client,
      });
    case "rotate":
      return fetch(`${options.adminOrigin}/admin/v1/keys/${victim.keyId}/rotate`, {
        method: "POST",
        headers: admin,
        body: JSON.stringify({ grace: "1h" }),
        client: options.client,
      });
    case "user":
      return fetch(`${options.adminOrigin}/admin/v1/users/${victim.userId}/tokens/revoke`, {
        method: "POST",
        headers: admin,
        body: "{}",
        client: options.client,
      });
  }
}

/** Logs in at a steady rate on A (users with a key and no token: no cap ends a grant). */
export async function logIn(options: {
  stop: { now: boolean };
  client: Deno.HttpClient;
  a: string;
  issuers: SeedEntry[];
}): Promise<string> {
  let [ok, all] = [0, 0];
  while (!options.stop.now) {
    const victim = options.issuers[all % options.issuers.length];
    const response = await fetch(`${options.a}/api/userservice/tokens`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({
        auth_request: {
          user: { email: victim.email, password: "bench password" },
          api_key: victim.apiKey,
        },
      }),
      client: options.client,
    }).catch(() => undefined);
    await response?.arrayBuffer();
    all++;
    if (response?.status === 200) ok++;
    await sleep(1000 / LOGINS_PER_SECOND);
  }
  return `${ok}/${all} answered 200`;
}

/** Every `everyMs`: a victim's token used on A, revoked through B, polled on A until 401. */
export async function probeDelays(options: {
  stop: { now: boolean };
  client: Deno.HttpClient;
  a: string;
  b: string;
  probes: { apiKey: string; token: string }[];
  everyMs: number;
  /** Probes to make at most (default: until told to stop). */
  count?: number;
  /** Run after A has the token cached and before B revokes it (e.g. cut A's listener). */
  beforeRevoking?: () => Promise<void>;
}): Promise<number[]> {
  const delays: number[] = [];
  const ask = async (url: string, method = "GET") => {
    const response = await fetch(url, { method, client: options.client });
    await response.arrayBuffer();
    return response.status;
  };
  while (!options.stop.now && delays.length < (options.count ?? Infinity)) {
    const probe = options.probes.pop();
    if (probe === undefined) break;
    const path = `${SECURE}?api_key=${probe.apiKey}&api_token=${probe.token}`;
    if (await ask(options.a + path) !== 200) continue; // ended by a revoke-all already
    await ask(options.a + path); // now in A's cache
    await options.beforeRevoking?.();
    if (await ask(options.b + path, "DELETE") !== 204) continue;
    const answered = performance.now();
    for (;;) {
      const status = await ask(options.a + path);
      if (status === 401) {
        delays.push(performance.now() - answered);
        break;
      }
      if (performance.now() - answered > 5000) throw new Error("A kept accepting a revoked token");
    }
    await sleep(options.everyMs);
  }
  return delays;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
