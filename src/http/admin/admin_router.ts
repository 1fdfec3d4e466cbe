/**
 * What the admin API's routes are given: the listener's dependencies, and per
 * request the operator, the path's parameters, the URL and the domain's change
 * dependencies. Its routes are rows of the route table both listeners use
 * (../route_table.ts): a method, a path pattern with `:name` segments, who may
 * call it (`operator`, or `writer` for a change), and a handler.
 *
 * @module
 */
import type { ChangeDeps } from "../../auth/changes.ts";
import type { AccountDeps } from "../../auth/users.ts";
import type { Clock } from "../../platform/clock.ts";
import type { Logger } from "../../platform/logger.ts";
import type { CounterTotals } from "../../platform/metrics.ts";
import type { PasswordHasher } from "../../passwords/passwords.ts";
import type { StatsHistory } from "../../auth/stats_history.ts";
import type { ThrottleRule } from "../../auth/throttle.ts";
import type { Operator, Store } from "../../store/store.ts";
import type { Route } from "../route_table.ts";

/** What the admin listener's handler needs. */
export interface AdminDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Hashes the passwords of users made or changed through the API. */
  hasher: PasswordHasher;
  /** The metrics' running totals (src/platform/metrics.ts), for the dashboard. */
  readCounters(): Promise<CounterTotals>;
  /** The token lifetime of users without their own, in seconds (shown in user details). */
  defaultTimeoutSeconds: number;
  /** The dashboard's last hour, sampled by main.ts; without it the history is empty. */
  history?: StatsHistory;
  /**
   * The portal's public origin (`--portal-origin`) when the portal is on: the link in an
   * approval's mail. Without it, approving answers 409.
   */
  portalOrigin?: string;
  /** The rule for failed operator sign-ins per client address (see src/auth/operators.ts). */
  operatorRule?: ThrottleRule;
}

/** What a route handler gets besides the request. */
export interface AdminContext {
  deps: AdminDeps;
  operator: Operator;
  /** The path's `:name` segments, decoded. */
  params: Record<string, string>;
  url: URL;
  /** The domain's change dependencies: actor `operator:<name>`. */
  changes: ChangeDeps;
  /** {@link changes} and the hasher, for changes that take a password. */
  accounts: AccountDeps;
}

/** One route of the admin API: for `operator` or `writer` callers. */
export type AdminRoute = Route<AdminContext> & { caller: "operator" | "writer" };
