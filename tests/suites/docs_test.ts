/**
 * The documentation as a small site that cannot drift: README within 300
 * lines with a table of contents, no prose line over 100 characters, every
 * relative link and anchor resolving, every `sh` block run by a test or saying
 * why not (tests/_helpers/doc_blocks.ts). docs_examples_test.ts runs the
 * `sh runnable` blocks.
 */
import assert from "node:assert/strict";
import { basename, dirname, join } from "node:path";
import { readDocBlocks, readShellMark } from "../_helpers/doc_blocks.ts";
import { anchors, DOCS, proseLines, read, ROOT } from "../_helpers/docs_site.ts";

Deno.test("[docs] README is at most 300 lines and starts with a table of contents", () => {
  const readme = read("README.md");
  const lines = readme.trimEnd().split("\n");
  assert.ok(lines.length <= 300, `README has ${lines.length} lines`);
  const contents = readme.indexOf("\n## Contents\n");
  assert.ok(contents > 0 && contents < readme.indexOf("\n## ", contents + 1) + 1);
  const own = anchors(readme);
  const listed = [...readme.slice(contents).matchAll(/^- \[[^\]]+\]\(#([^)]+)\)/gm)].map((m) =>
    m[1]
  );
  assert.ok(listed.length >= 6);
  for (const anchor of listed) assert.ok(own.has(anchor), `#${anchor}`);
});

Deno.test("[docs] the site has a page per audience, a LICENSE and a CHANGELOG", () => {
  for (
    const page of ["api", "configuration", "operations", "security", "performance", "architecture"]
  ) {
    assert.ok(DOCS.includes(`docs/${page}.md`), page);
  }
  assert.match(Deno.readTextFileSync(`${ROOT}LICENSE`), /^MIT License\n/);
});

Deno.test("[docs] no line outside code blocks and tables is wider than 100 characters", () => {
  for (const path of DOCS) {
    for (const [n, line] of proseLines(read(path))) {
      // A Markdown table's row cannot wrap; every other line can.
      if (line.startsWith("|")) continue;
      assert.ok(line.length <= 100, `${path}:${n} has ${line.length} characters`);
    }
  }
});

Deno.test("[docs] every relative link and anchor resolves", () => {
  for (const path of DOCS) {
    const text = read(path);
    for (const [n, line] of proseLines(text)) {
      for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [file, anchor] = target.split("#");
        const resolved = file === "" ? path : join(dirname(path), file);
        let stat;
        try {
          stat = Deno.statSync(`${ROOT}${resolved}`);
        } catch {
          assert.fail(`${path}:${n}: ${target} does not exist`);
        }
        if (anchor !== undefined && stat.isFile && resolved.endsWith(".md")) {
          assert.ok(
            anchors(Deno.readTextFileSync(`${ROOT}${resolved}`)).has(anchor),
            `${path}:${n}: no heading for #${anchor} in ${resolved}`,
          );
        }
      }
    }
  }
});

Deno.test("[docs] every sh block is run by a test or says why not", () => {
  for (const path of DOCS) {
    for (const block of readDocBlocks(read(path))) {
      if (block.language !== "sh") continue;
      const mark = readShellMark(block.info);
      const where = `${path}:${block.line}`;
      assert.notEqual(
        mark.kind,
        "unmarked",
        `${where}: "${block.info}" is neither \`sh runnable\`, \`sh tested-by: tests/…_test.ts\` ` +
          "nor `sh not-run: REASON`",
      );
      if (mark.kind === "tested-by") {
        const test = Deno.readTextFileSync(`${ROOT}${mark.test}`);
        assert.ok(test.includes(basename(path)), `${where}: ${mark.test} never reads ${path}`);
      }
    }
  }
});

/** The files under `dir`, recursively. */
function listFiles(dir: string): string[] {
  return [...Deno.readDirSync(`${ROOT}${dir}`)].flatMap((entry) =>
    entry.isDirectory ? listFiles(`${dir}/${entry.name}`) : [`${dir}/${entry.name}`]
  );
}

Deno.test("[docs] the docs, the console and the messages name the commands a deno task user types", () => {
  // `keygate admin …` and `keygate serve` exist only in a compiled binary, which is named by its
  // path where it is meant (`dist/keygate admin …`); `keygate admin:` prefixes the CLI's messages.
  const binaryCommand = /(?<![/\w.-])keygate (admin|serve)\b(?! API|:)/;
  const files = [
    ...DOCS,
    ...listFiles("src").filter((path) => /\.(ts|js|html)$/.test(path)),
  ];
  for (const path of files) {
    Deno.readTextFileSync(`${ROOT}${path}`).split("\n").forEach((line, i) => {
      if (/^\s*(\*|\/\/)/.test(line)) return; // a code comment, for the code's readers
      assert.doesNotMatch(line, binaryCommand, `${path}:${i + 1}`);
    });
  }
});
