/**
 * What the console's pages share: tables, and running a change after a confirmation.
 *
 * @module
 */
import { confirmDialog, h, toast } from "../dom.js";

export function table(headers, rows, caption) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, headers.map((text) => h("th", { scope: "col" }, text)))),
      h(
        "tbody",
        {},
        rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length }, "None")),
      ),
    ),
  );
}

export function failed(error) {
  toast(error.message, "error");
}

/** Runs a change after a confirmation; reports success or the API's message. */
export async function change(question, action, run, done) {
  if (question && !(await confirmDialog(question, action))) return;
  try {
    const result = await run();
    if (done) await done(result);
  } catch (error) {
    failed(error);
  }
}
