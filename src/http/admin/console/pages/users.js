/**
 * The users page: search, pages, and adding a user (write operators).
 *
 * @module
 */
import { api, toQuery } from "../api.js";
import { badge, duration, field, h, replace, toast, when } from "../dom.js";
import { change, pager, table } from "./shared.js";

export async function renderUsers(main, session, params) {
  const search = h("input", { type: "search", name: "search", value: params.get("search") ?? "" });
  const list = h("div");
  const searchForm = h(
    "form",
    { class: "inline", role: "search" },
    field("Search e-mail", search),
    h("button", { type: "submit" }, "Search"),
  );
  searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/users${toQuery({ search: search.value.trim() })}`;
  });
  replace(main, h("h1", {}, "Users"), searchForm, list, session.canWrite ? newUserForm() : null);

  const page = await api(
    "GET",
    `/users${toQuery({ search: params.get("search"), cursor: params.get("cursor"), limit: 25 })}`,
  );
  replace(
    list,
    table(
      ["E-mail", "Status", "Token lifetime", "Created"],
      page.users.map((user) =>
        h(
          "tr",
          {},
          h("td", {}, h("a", { href: `#/users/${user.id}` }, user.email)),
          h("td", {}, badge(user.status)),
          h(
            "td",
            {},
            user.token_timeout_seconds === null ? "default" : duration(user.token_timeout_seconds),
          ),
          h("td", {}, when(user.created_at)),
        )
      ),
      "Users by e-mail",
    ),
    pager("/users", params, page.next),
  );
}

function newUserForm() {
  const email = h("input", { type: "email", name: "email", required: true, autocomplete: "off" });
  const password = h("input", {
    type: "password",
    name: "password",
    required: true,
    autocomplete: "new-password",
  });
  const timeout = h("input", {
    type: "text",
    name: "token_timeout",
    placeholder: "default",
    pattern: "[0-9]+[smhd]",
  });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "new-user-title" },
    h("h2", { id: "new-user-title" }, "Add a user"),
    field("E-mail", email),
    field("Password", password),
    field("Token lifetime", timeout, 'Such as "10h"; empty for the server\'s default.'),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Add user")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    change(null, null, () =>
      api("POST", "/users", {
        email: email.value.trim(),
        password: password.value,
        token_timeout: timeout.value.trim() || null,
      }), (user) => {
      toast(`Added ${user.email}`);
      location.hash = `#/users/${user.id}`;
    });
  });
  return form;
}
