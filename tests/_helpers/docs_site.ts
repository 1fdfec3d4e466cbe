/** The documentation as the docs suites read it: the pages, their prose lines and anchors. */

export const ROOT = new URL("../../", import.meta.url).pathname;
export const DOCS = [
  "README.md",
  "CHANGELOG.md",
  ...[...Deno.readDirSync(`${ROOT}docs`)].filter((e) => e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`).sort(),
];
/**
 * Where `deno task bench` writes its table (scripts/bench/report.ts): between its begin and end
 * markers, or, in a page without them, everything after the older marker. Generated text is not
 * held to the prose rules; the hand-written text around it is.
 */
export const GENERATED_BEGIN = "<!-- bench:begin -->";
export const GENERATED_END = "<!-- bench:end -->";
export const GENERATED_MARKER = "<!-- Written by deno task bench from here on";

/**
 * A page as the docs suites hold it: without what the bench generated. The generated lines are
 * blanked, not cut, so that line numbers stay those of the file.
 */
export function read(path: string): string {
  const text = Deno.readTextFileSync(`${ROOT}${path}`);
  const blank = (part: string) => part.replace(/[^\n]+/g, "");
  const from = text.indexOf(GENERATED_BEGIN);
  const to = text.indexOf(GENERATED_END);
  if (from !== -1 && to > from) {
    return text.slice(0, from) + blank(text.slice(from, to + GENERATED_END.length)) +
      text.slice(to + GENERATED_END.length);
  }
  const at = text.indexOf(GENERATED_MARKER);
  return at === -1 ? text : text.slice(0, at);
}

/** The lines outside fenced code blocks, with their numbers. */
export function proseLines(text: string): [number, string][] {
  let fenced = false;
  const lines: [number, string][] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trimStart().startsWith("```")) fenced = !fenced;
    else if (!fenced) lines.push([i + 1, line]);
  });
  return lines;
}

/** GitHub's heading anchors. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, line] of proseLines(text)) {
    for (const [, id] of line.matchAll(/<a id="([^"]+)"><\/a>/g)) result.add(id);
    const heading = /^#{1,6} (.+)$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, "").replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    result.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return result;
}
