/**
 * The login throttle: live failed-login counters, and clearing them.
 *
 * @module
 */
import { api, toQuery } from "../api.js";
import { field, h, replace, toast, when } from "../dom.js";
import { change, failed, pager, table } from "./shared.js";

export async function renderThrottle(main, session, params) {
  const { counters, next } = await api(
    "GET",
    `/throttle${toQuery({ cursor: params.get("cursor"), limit: 50 })}`,
  );
  const rerender = () => renderThrottle(main, session, params).catch(failed);
  const target = h("input", { type: "text", name: "target", required: true });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "clear-title" },
    h("h2", { id: "clear-title" }, "Clear counters"),
    field(
      "E-mail or client address",
      target,
      "A user's e-mail clears the counters of all their keys; an address both of its counters; " +
        "a subject as listed (admin:127.0.0.1) that one.",
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Clear")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    change(
      `Forget the failed-login counters of ${target.value}?`,
      "Clear",
      () => api("POST", "/throttle/clear", { target: target.value.trim() }),
      (r) => {
        toast(`${r.cleared} counter(s) cleared`);
        rerender();
      },
    );
  });
  replace(
    main,
    h("h1", {}, "Login throttle"),
    table(
      ["Subject", "User", "Failures", "Blocked until", "Last failure"],
      counters.map((c) =>
        h(
          "tr",
          {},
          h("td", {}, c.subject),
          h("td", {}, c.email ?? "—"),
          h("td", {}, c.failures),
          h("td", {}, c.blocked ? when(c.blocked_until) : "not blocked"),
          h("td", {}, when(c.last_failure_at)),
        )
      ),
      "Live failed-login counters",
    ),
    pager("/throttle", params, next),
    session.canWrite ? form : null,
  );
}
