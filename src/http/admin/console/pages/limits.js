/**
 * Rates and quotas: every limit set (removing one), setting one for a key, a user or the
 * default, and what is left of the limits in force for one key (`?key=ID`).
 *
 * @module
 */
import { api, toQuery } from "../api.js";
import { field, h, replace, toast, when } from "../dom.js";
import { change, failed, table } from "./shared.js";

const APPLIES = [["key", "An API key"], ["user", "A user (all its keys)"], [
  "default",
  "The default",
]];

function appliesTo(limit) {
  if (limit.applies_to === "default") return "default";
  return `${limit.applies_to} ${limit.subject_id}`;
}

/** A rotated key's limits are its successor's: says so, and links to that key's. */
function rotatedNote(keyId, lastId) {
  return h(
    "p",
    { class: "hint" },
    `Key ${keyId} was rotated: the rotation moved its limits, with what they used, to key ` +
      `${lastId}, and it counts against them until it ends. They are shown below, and set on `,
    h("a", { href: `#/limits${toQuery({ key: String(lastId) })}` }, `key ${lastId}`),
    ".",
  );
}

export async function renderLimits(main, session, params) {
  const keyId = params.get("key");
  const [{ limits }, usage] = await Promise.all([
    api("GET", "/limits"),
    keyId ? api("GET", `/keys/${encodeURIComponent(keyId)}/limits`) : undefined,
  ]);
  const rerender = () => renderLimits(main, session, params).catch(failed);

  const scope = h(
    "select",
    { name: "applies_to" },
    APPLIES.map(([value, label]) => h("option", { value }, label)),
  );
  const subject = h("input", { type: "number", name: "subject_id", min: "1" });
  const kind = h(
    "select",
    { name: "kind" },
    h("option", { value: "rate" }, "Rate"),
    h("option", { value: "quota" }, "Quota"),
  );
  const value = h("input", { type: "text", name: "limit", required: true });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "set-title" },
    h("h2", { id: "set-title" }, "Set a limit"),
    field("Applies to", scope),
    field("Key or user id", subject, "Not for the default."),
    field("Kind", kind),
    field(
      "Limit",
      value,
      "A rate: COUNT/PERIOD (second, minute, hour, day). A quota: COUNT for good, or " +
        "COUNT/PERIOD (hour, day, month). The same rate period, or the quota, is replaced.",
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Set limit")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { applies_to: scope.value, kind: kind.value, limit: value.value.trim() };
    if (scope.value !== "default") body.subject_id = Number(subject.value);
    change(undefined, undefined, () => api("POST", "/limits", body), (limit) => {
      toast(`The ${limit.kind} of ${appliesTo(limit)} is now ${limit.limit}`);
      rerender();
    });
  });

  const lookup = h("input", { type: "number", name: "key", min: "1", value: keyId ?? "" });
  const find = h(
    "form",
    { class: "filters", role: "search", "aria-label": "A key's limits" },
    field("Key id", lookup),
    h("button", { type: "submit" }, "Show its limits"),
  );
  find.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/limits${toQuery({ key: lookup.value })}`;
  });

  replace(
    main,
    h("h1", {}, "Rates and quotas"),
    table(
      ["Applies to", "Kind", "Limit", "Updated", session.canWrite ? "Actions" : ""],
      limits.map((limit) =>
        h(
          "tr",
          {},
          h("td", {}, appliesTo(limit)),
          h("td", {}, limit.kind),
          h("td", {}, limit.limit),
          h("td", {}, when(limit.updated_at)),
          h(
            "td",
            {},
            session.canWrite
              ? h("button", {
                type: "button",
                class: "secondary",
                "aria-label": `Remove the ${limit.kind} ${limit.limit} of ${appliesTo(limit)}`,
                onclick: () =>
                  change(
                    `Remove the ${limit.kind} ${limit.limit} of ${appliesTo(limit)}?`,
                    "Remove limit",
                    () => api("DELETE", `/limits/${limit.id}`),
                    () => {
                      toast(`Removed the ${limit.kind} of ${appliesTo(limit)}`);
                      rerender();
                    },
                  ),
              }, "Remove")
              : null,
          ),
        )
      ),
      "Limits set",
    ),
    find,
    usage?.counts_against_key ? rotatedNote(keyId, usage.counts_against_key) : null,
    usage
      ? table(
        ["From", "Kind", "Limit", "Used", "Remaining", "Resets"],
        usage.limits.map((u) =>
          h(
            "tr",
            {},
            h("td", {}, u.applies_to),
            h("td", {}, u.kind),
            h("td", {}, u.limit),
            h("td", {}, u.used),
            h("td", {}, u.remaining),
            h("td", {}, u.resets_at ? when(u.resets_at) : "never"),
          )
        ),
        `In force for key ${keyId}`,
      )
      : null,
    session.canWrite ? form : null,
  );
}
