/**
 * The fenced code blocks of a Markdown page, with their info strings, for
 * the tests that run or check what the docs show.
 *
 * A shell block's info string says what a test does with it (GitHub reads
 * only the first word, `sh`, and highlights the block as shell):
 *
 * - `sh runnable`: tests/suites/docs_examples_test.ts runs it, in page order, in a sandbox
 *   clone (`sh runnable fixture=NAME` prepares the sandbox first);
 * - `sh tested-by: tests/FILE_test.ts`: that test runs it;
 * - `sh not-run: REASON`: no test runs it, for the reason given.
 */

/** One fenced block. */
export interface DocBlock {
  /** The info string after the opening fence, such as `sh runnable`. */
  info: string;
  /** The first word of the info string: `sh`, `ini`, `nginx`… */
  language: string;
  /** The text between the fences, ending with a newline. */
  body: string;
  /** The line number of the opening fence (1-based). */
  line: number;
}

/** The fenced blocks of `markdown`, in order. */
export function readDocBlocks(markdown: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  let open: { info: string; line: number; lines: string[] } | undefined;
  markdown.split("\n").forEach((text, index) => {
    if (open === undefined) {
      const fence = /^```(.*)$/.exec(text);
      if (fence) open = { info: fence[1].trim(), line: index + 1, lines: [] };
    } else if (text === "```") {
      const language = open.info.split(/\s/)[0];
      blocks.push({
        info: open.info,
        language,
        body: open.lines.join("\n") + "\n",
        line: open.line,
      });
      open = undefined;
    } else {
      open.lines.push(text);
    }
  });
  return blocks;
}

/** What a test does with a shell block (see the module comment). */
export type ShellMark =
  | { kind: "runnable"; fixture?: string }
  | { kind: "tested-by"; test: string }
  | { kind: "not-run"; reason: string }
  | { kind: "unmarked" };

/** Reads a `sh` block's info string. */
export function readShellMark(info: string): ShellMark {
  const rest = info.replace(/^sh\s*/, "");
  if (rest === "") return { kind: "unmarked" };
  const runnable = /^runnable(?: fixture=([a-z0-9-]+))?$/.exec(rest);
  if (runnable) return { kind: "runnable", fixture: runnable[1] };
  const testedBy = /^tested-by: (tests\/\S+_test\.ts)$/.exec(rest);
  if (testedBy) return { kind: "tested-by", test: testedBy[1] };
  const notRun = /^not-run: (.{10,})$/.exec(rest);
  if (notRun) return { kind: "not-run", reason: notRun[1] };
  return { kind: "unmarked" };
}

/** The `sh runnable` blocks of a page, in order. */
export function runnableBlocks(text: string): DocBlock[] {
  return readDocBlocks(text).filter((block) =>
    block.language === "sh" && readShellMark(block.info).kind === "runnable"
  );
}
