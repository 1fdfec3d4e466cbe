/**
 * The audit log: filters by actor, action, subject and time, newest first, paged.
 *
 * @module
 */
import { api, toQuery } from "../api.js";
import { field, h, replace, when } from "../dom.js";
import { pager, table } from "./shared.js";

/**
 * The audit actions for the filter's list, as the server's OpenAPI document
 * gives them (the one list is src/auth/audit.ts); fetched once per page load.
 */
let auditActions;

function loadAuditActions() {
  auditActions ??= api("GET", "/openapi.json", undefined, null).then(
    (doc) =>
      doc.paths["/admin/v1/audit"].get.parameters.find((p) => p.name === "action").schema.enum,
    (error) => {
      auditActions = undefined; // try again on the next visit
      throw error;
    },
  );
  return auditActions;
}

export async function renderAudit(main, _session, params) {
  const actions = await loadAuditActions();
  const actor = h("input", {
    type: "text",
    name: "actor",
    value: params.get("actor") ?? "",
    placeholder: "operator:ann",
  });
  const action = h(
    "select",
    { name: "action" },
    h("option", { value: "" }, "Any"),
    actions.map((a) => h("option", { value: a, selected: params.get("action") === a }, a)),
  );
  const subject = h("input", {
    type: "text",
    name: "subject",
    value: params.get("subject") ?? "",
    placeholder: "user:a@example.org",
  });
  const from = h("input", {
    type: "datetime-local",
    name: "from",
    value: params.get("from") ?? "",
  });
  const to = h("input", { type: "datetime-local", name: "to", value: params.get("to") ?? "" });
  const filters = h(
    "form",
    { class: "card filters", role: "search", "aria-label": "Audit filters" },
    field("Actor", actor),
    field("Action", action),
    field("Subject", subject),
    field("From", from),
    field("To", to),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit" }, "Filter"),
      h("a", { href: "#/audit", class: "button secondary" }, "Clear"),
    ),
  );
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/audit${
      toQuery({
        actor: actor.value.trim(),
        action: action.value,
        subject: subject.value.trim(),
        from: from.value,
        to: to.value,
      })
    }`;
  });
  const results = h("div");
  replace(main, h("h1", {}, "Audit log"), filters, results);

  const toInstant = (local) => local ? new Date(local).toISOString() : undefined;
  const query = {
    actor: params.get("actor"),
    action: params.get("action"),
    subject: params.get("subject"),
    from: toInstant(params.get("from")),
    to: toInstant(params.get("to")),
  };
  const page = await api(
    "GET",
    `/audit${toQuery({ ...query, cursor: params.get("cursor"), limit: 25 })}`,
  );
  replace(
    results,
    table(
      ["Time", "Actor", "Action", "Subject", "Detail"],
      page.entries.map((entry) =>
        h(
          "tr",
          {},
          h("td", {}, when(entry.at)),
          h("td", {}, h("a", { href: `#/audit${toQuery({ actor: entry.actor })}` }, entry.actor)),
          h("td", {}, h("code", {}, entry.action)),
          h(
            "td",
            {},
            h("a", { href: `#/audit${toQuery({ subject: entry.subject })}` }, entry.subject),
          ),
          h(
            "td",
            { class: "detail" },
            Object.entries(entry.detail).map(([k, v]) => h("span", {}, `${k}=${v ?? "null"}`)),
          ),
        )
      ),
      "Newest first",
    ),
    // With two or more filters a page may be short, even empty, and still go on.
    page.entries.length === 0 && page.next
      ? h("p", {}, "No match among the entries searched so far: the next page goes on.")
      : null,
    pager("/audit", params, page.next),
  );
}
