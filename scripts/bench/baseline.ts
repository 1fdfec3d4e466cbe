/**
 * A baseline revision for any section of the benchmark: keygate as it was at an earlier commit,
 * checked out beside the working tree (`git worktree add --detach`), started the same way as
 * today's and measured in the same run, so a "× before" ratio compares like with like on the
 * same machine at the same moment.
 *
 * A section that takes `--baseline REV` (`BenchContext.baseline`) opens it once, starts servers
 * from it with {@link Baseline.argv} (the same flags as today's; the revision's own deno.json and
 * lock file), and, for PostgreSQL, copies the seed into a database of its own with
 * {@link Baseline.copySeedToPostgres}: the revision's own migrations make its schema, so a newer
 * schema never meets an older keygate (which refuses it).
 *
 * @module
 */

import type { SeedEntry } from "./seed.ts";

/** What {@link Baseline.seedSqlite} makes: the options of `seedDatabase` both revisions take. */
export interface SeedOptions {
  tokens: number;
  sample: number;
  passwordHash: string;
}

/** The repository the bench runs from (this file's). */
const REPO = new URL("../..", import.meta.url).pathname;

/** An earlier revision of keygate, checked out for the bench. */
export interface Baseline {
  /** The revision as given (`--baseline`), and its commit's short hash and subject. */
  readonly rev: string;
  readonly label: string;
  /** Where it is checked out. */
  readonly root: string;
  /**
   * The command line that runs the revision's `script` (relative to its root, e.g. `main.ts`)
   * with `permissions` and `args`, under the revision's own configuration.
   */
  argv(permissions: string[], script: string, args: string[]): string[];
  /** Copies the SQLite seed at `sqlitePath` into the empty database `url`, as the revision does. */
  copySeedToPostgres(sqlitePath: string, url: string): Promise<void>;
  /**
   * Seeds a new SQLite database at `path` with the revision's own seeding (its schema, its
   * migrations) and returns the sample of credentials it drew: the same shape as today's seed,
   * other random keys and tokens.
   */
  seedSqlite(path: string, options: SeedOptions): Promise<SeedEntry[]>;
  /** Removes the checkout. */
  close(): Promise<void>;
}

async function git(args: string[]): Promise<string> {
  const output = await new Deno.Command("git", {
    args,
    cwd: REPO,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const text = new TextDecoder();
  if (!output.success) {
    throw new Error(`git ${args.join(" ")}: ${text.decode(output.stderr).trim()}`);
  }
  return text.decode(output.stdout).trim();
}

/** The commit `rev` names in this repository, or undefined when it names none. */
export async function resolveRevision(rev: string): Promise<string | undefined> {
  return await git(["rev-parse", "--verify", "--quiet", `${rev}^{commit}`]).catch(() => undefined);
}

/** Checks `rev` out under `work` (a directory the bench removes at the end). */
export async function openBaseline(rev: string, work: string): Promise<Baseline> {
  const commit = await git(["rev-parse", "--verify", `${rev}^{commit}`]);
  const label = await git(["log", "-1", "--format=%h (%s)", commit]);
  const root = `${work}/baseline-${commit.slice(0, 12)}`;
  await git(["worktree", "add", "--detach", root, commit]);
  const deno = (permissions: string[], script: string, args: string[]) => [
    Deno.execPath(),
    "run",
    "--config",
    `${root}/deno.json`,
    ...permissions,
    `${root}/${script}`,
    ...args,
  ];
  /** Runs `code` with `deno eval` under the revision's configuration; returns its stdout. */
  const evaluate = async (what: string, code: string, args: string[]) => {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--config", `${root}/deno.json`, code, ...args],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!output.success) {
      throw new Error(
        `baseline ${rev}: ${what} failed: ${new TextDecoder().decode(output.stderr)}`,
      );
    }
    return new TextDecoder().decode(output.stdout);
  };
  const module = (path: string) => JSON.stringify(`file://${root}/${path}`);
  return {
    rev,
    label: label.length > 90 ? `${label.slice(0, 87)}...)` : label,
    root,
    argv: deno,
    async copySeedToPostgres(sqlitePath, url) {
      await evaluate(
        "copying the seed",
        `const { copySeedToPostgres } = await import(${module("scripts/bench/seed_postgres.ts")});
         await copySeedToPostgres(Deno.args[0], Deno.args[1]);`,
        [sqlitePath, url],
      );
    },
    async seedSqlite(path, options) {
      const printed = await evaluate(
        "seeding",
        `const { seedDatabase } = await import(${module("scripts/bench/seed.ts")});
         const seeded = await seedDatabase(Deno.args[0], JSON.parse(Deno.args[1]));
         console.log(JSON.stringify(seeded.sample));`,
        [path, JSON.stringify(options)],
      );
      return JSON.parse(printed.trim().split("\n").at(-1)!) as SeedEntry[];
    },
    async close() {
      await git(["worktree", "remove", "--force", root]).catch(() => {});
    },
  };
}
