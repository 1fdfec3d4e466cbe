/**
 * Every API key with its owner and last use, optionally only those not used
 * for a while (GET /admin/v1/keys?unused=…), to find keys to rotate or revoke.
 *
 * @module
 */
import { api, toQuery } from "../api.js";
import { badge, field, h, replace, when } from "../dom.js";
import { pager, table } from "./shared.js";

const UNUSED = [["", "Any"], ["7d", "7 days"], ["30d", "30 days"], ["90d", "90 days"]];

export async function renderKeys(main, _session, params) {
  const unused = h(
    "select",
    { name: "unused" },
    UNUSED.map(([value, label]) =>
      h("option", { value, selected: (params.get("unused") ?? "") === value }, label)
    ),
  );
  const filter = h(
    "form",
    { class: "inline", role: "search" },
    field("Not used for", unused),
    h("button", { type: "submit" }, "Show"),
  );
  filter.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/keys${toQuery({ unused: unused.value })}`;
  });
  const list = h("div");
  replace(main, h("h1", {}, "API keys"), filter, list);
  const { keys, next } = await api(
    "GET",
    `/keys${toQuery({ unused: params.get("unused"), cursor: params.get("cursor"), limit: 50 })}`,
  );
  replace(
    list,
    table(
      ["Id", "Key", "User", "Label", "Status", "Last used", "Uses", "Expires"],
      keys.map((key) =>
        h(
          "tr",
          { "data-key-id": key.id },
          h("td", {}, key.id),
          h("td", {}, h("code", { class: "prefix" }, `${key.prefix}…`)),
          h("td", {}, h("a", { href: `#/users/${key.user_id}` }, key.email)),
          h("td", {}, key.label || "—"),
          h("td", {}, badge(key.status)),
          h(
            "td",
            {},
            when(key.last_used_at),
            key.last_used_from ? h("small", {}, ` from ${key.last_used_from}`) : null,
          ),
          h("td", {}, key.use_count),
          h("td", {}, when(key.expires_at)),
        )
      ),
      params.get("unused")
        ? `Keys not revoked and not used for ${params.get("unused")}`
        : "Every key, by user",
    ),
    pager("/keys", params, next),
  );
}
