/**
 * What the console's pages share: tables, and running a change after a confirmation.
 *
 * @module
 */
import { toQuery } from "../api.js";
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

/**
 * The links under a paged list: back to the first page (when on a later one) and on to the
 * next (when the API gave a `next`). `name` is the page's query parameter for the cursor;
 * every other parameter of `params` is kept.
 */
export function pager(route, params, next, name = "cursor") {
  const keep = Object.fromEntries([...params].filter(([key]) => key !== name));
  return h(
    "nav",
    { class: "pager", "aria-label": "Pages" },
    params.get(name) ? h("a", { href: `#${route}${toQuery(keep)}` }, "First page") : null,
    next ? h("a", { href: `#${route}${toQuery({ ...keep, [name]: next })}` }, "Next page") : null,
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
