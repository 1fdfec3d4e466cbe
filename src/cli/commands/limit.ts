/**
 * `admin limit …`: set, remove and read rates and quotas of an API key, a user (shared by all
 * its keys) or the default (keys without their own), and what is left of them.
 *
 * @module
 */
import {
  formatLimitValue,
  KIND_PERIODS,
  listKeyLimits,
  listLimitsOf,
  parseLimitValue,
  readKeyLimitUsage,
  readLimitUsage,
  removeLimit,
  setLimit,
} from "../../auth/limits.ts";
import type { ApiKey, LimitPeriod, LimitRule, Store, User } from "../../store/store.ts";
import type { Command } from "../command.ts";
import { AdminError } from "../io.ts";
import { printRows } from "../output.ts";
import { clip, findKey, findUser } from "../values.ts";

const TARGET = {
  name: "TARGET",
  description: "default, a user's e-mail (all its keys), or an API key (id, prefix or whole key)",
};

/** What TARGET names, and how to name it in a message. */
type Target =
  & (
    | { scope: "key"; key: ApiKey }
    | { scope: "user"; user: User }
    | { scope: "default" }
  )
  & { label: string };

/** What TARGET names. */
async function findTarget(store: Store, text: string): Promise<Target> {
  if (text === "default") return { scope: "default", label: "the default" };
  if (text.includes("@")) {
    const user = await findUser(store, text);
    return { scope: "user", user, label: `user ${user.email}` };
  }
  const { key, description } = await findKey(store, text);
  return { scope: "key", key, label: description };
}

/** Where a rotated key's limits went (to standard error: the rows printed are them). */
function rotatedNote(label: string, lastId: number): string {
  return `Note: ${label} was rotated; these are its successor's limits (key ${lastId}), ` +
    "which it counts against until it ends";
}

function toRow(rule: LimitRule, subjects: Map<number, string>) {
  return {
    id: rule.id,
    applies_to: rule.scope === "default"
      ? "default"
      : rule.scope === "user"
      ? `user ${subjects.get(rule.subjectId!) ?? rule.subjectId}`
      : `key ${rule.subjectId}`,
    kind: rule.kind,
    limit: formatLimitValue(rule),
    updated_at: new Date(rule.updatedAt).toISOString(),
  };
}

/** The `limit` commands. */
export const LIMIT_COMMANDS: readonly Command[] = [
  {
    words: ["limit", "set"],
    summary: "Set a rate or the quota of an API key, a user or the default",
    description:
      "A rate is COUNT/PERIOD, PERIOD one of second, minute, hour, day (several rates of " +
      "different periods may apply). The quota is COUNT (never refilled) or COUNT/PERIOD, " +
      "PERIOD one of hour, day, month (calendar month, UTC). A user's limits are shared by all " +
      "its keys; the default applies to every key without its own limit of that kind. Setting " +
      "a rate of the same period, or the quota, replaces it. Takes effect at once on every " +
      "server.",
    arguments: [TARGET],
    options: [
      { name: "rate", kind: "value", placeholder: "COUNT/PERIOD", description: "e.g. 10/second" },
      {
        name: "quota",
        kind: "value",
        placeholder: "COUNT[/PERIOD]",
        description: "e.g. 100000/month, or 5000 for good",
      },
    ],
    database: "existing",
    async run({ store, args, options, io, changes }) {
      const rate = options.rate;
      const quota = options.quota;
      if ((rate === undefined) === (quota === undefined)) {
        throw new AdminError(
          "Give exactly one of --rate COUNT/PERIOD or --quota COUNT[/PERIOD]",
          2,
        );
      }
      const value = rate !== undefined
        ? parseLimitValue("rate", rate)
        : parseLimitValue("quota", quota!);
      const target = await findTarget(store, args.TARGET!);
      const rule = await setLimit(changes, target, value);
      io.stdout(
        `Set the ${rule.kind} of ${target.label} to ${formatLimitValue(rule)} (limit ${rule.id})`,
      );
    },
  },
  {
    words: ["limit", "remove"],
    summary: "Remove a rate (by its period) or the quota of an API key, a user or the default",
    arguments: [TARGET, {
      name: "WHICH",
      description: "quota, or the period of the rate to remove: second, minute, hour or day",
    }],
    options: [],
    database: "existing",
    async run({ store, args, io, changes }) {
      const which = args.WHICH!;
      const period = which === "quota" ? undefined : which as LimitPeriod;
      if (period !== undefined && !KIND_PERIODS.rate.includes(period)) {
        throw new AdminError(
          `Invalid WHICH "${clip(which)}": expected quota, second, minute, hour or day`,
          2,
        );
      }
      const target = await findTarget(store, args.TARGET!);
      const removed = await removeLimit(
        changes,
        target,
        period === undefined ? { kind: "quota" } : { kind: "rate", period: period as LimitPeriod },
      );
      io.stdout(`Removed the ${removed.kind} ${formatLimitValue(removed)} of ${target.label}`);
    },
  },
  {
    words: ["limit", "list"],
    summary: "List the limits set: all, or those of one API key, user or the default",
    arguments: [{ ...TARGET, optional: true }],
    options: [{ name: "json", kind: "boolean", description: "Print JSON instead of a table" }],
    database: "existing",
    async run({ store, args, options, io }) {
      const target = args.TARGET === undefined ? undefined : await findTarget(store, args.TARGET);
      let rules;
      if (target?.scope === "key") {
        const listed = await listKeyLimits(store, target.key);
        if (listed.countsAgainst !== undefined) {
          io.stderr(rotatedNote(target.label, listed.countsAgainst));
        }
        rules = listed.rules;
      } else {
        rules = await listLimitsOf(store, target);
      }
      const emails = new Map((await store.listUsers()).map((user) => [user.id, user.email]));
      printRows(io, rules.map((rule) => toRow(rule, emails)), options.json !== undefined);
    },
  },
  {
    words: ["limit", "usage"],
    summary: "Show the limits in force for an API key (or a user's own) and what is left",
    description: "Used counts units leased by servers in the current window: requests answered, " +
      "plus at most about a second's worth each server holds and has not spent yet.",
    arguments: [{
      name: "TARGET",
      description: "An API key (id, prefix or whole key) or a user's e-mail",
    }],
    options: [{ name: "json", kind: "boolean", description: "Print JSON instead of a table" }],
    database: "existing",
    async run({ store, args, options, io }) {
      const target = await findTarget(store, args.TARGET!);
      if (target.scope === "default") {
        throw new AdminError(`Invalid TARGET "default": give an API key or a user's e-mail`, 2);
      }
      const now = io.clock.now();
      let usage;
      if (target.scope === "key") {
        const report = await readKeyLimitUsage(store, now, target.key);
        if (report.countsAgainst !== undefined) {
          io.stderr(rotatedNote(target.label, report.countsAgainst));
        }
        usage = report.limits;
      } else {
        usage = await readLimitUsage(store, now, { userId: target.user.id });
      }
      const rows = usage.map((u) => ({
        limit_id: u.rule.id,
        from: u.rule.scope,
        kind: u.rule.kind,
        limit: formatLimitValue(u.rule),
        used: u.used,
        remaining: u.remaining,
        resets_at: Number.isFinite(u.window.end) ? new Date(u.window.end).toISOString() : "never",
      }));
      printRows(io, rows, options.json !== undefined);
    },
  },
];
