/**
 * The developer portal's sign-ups that wait for an operator (`--portal-mode approval`):
 * approve one (its user is mailed) or refuse it (the account is deleted).
 *
 * @module
 */
import { api, toQuery } from "../api.js";
import { h, replace, toast, when } from "../dom.js";
import { change, failed, pager, table } from "./shared.js";

export async function renderPortal(main, session, params) {
  const { accounts, next } = await api(
    "GET",
    `/portal/pending${toQuery({ cursor: params.get("cursor"), limit: 50 })}`,
  );
  const rerender = () => renderPortal(main, session, params).catch(failed);
  const decide = (account, verb) =>
    change(
      verb === "approve"
        ? `Approve ${account.email}? The account becomes active and its user is mailed.`
        : `Refuse ${account.email}? The account is deleted; no mail is sent.`,
      verb === "approve" ? "Approve" : "Refuse",
      () => api("POST", `/portal/pending/${account.id}/${verb}`),
      () => {
        toast(`${account.email} ${verb === "approve" ? "approved" : "refused"}`);
        rerender();
      },
    );
  const actions = (account) =>
    session.canWrite
      ? h(
        "td",
        { class: "row-actions" },
        h("button", {
          type: "button",
          "aria-label": `Approve ${account.email}`,
          onclick: () => decide(account, "approve"),
        }, "Approve"),
        h("button", {
          type: "button",
          class: "danger",
          "aria-label": `Refuse ${account.email}`,
          onclick: () => decide(account, "refuse"),
        }, "Refuse"),
      )
      : null;
  replace(
    main,
    h("h1", {}, "Portal sign-ups"),
    h(
      "p",
      { class: "hint" },
      "Accounts that verified their e-mail and wait for an operator (--portal-mode approval).",
    ),
    table(
      ["E-mail", "Signed up", ...(session.canWrite ? ["Decision"] : [])],
      accounts.map((account) =>
        h(
          "tr",
          {},
          h("td", {}, account.email),
          h("td", {}, when(account.signed_up_at)),
          actions(account),
        )
      ),
      "Sign-ups waiting for approval",
    ),
    pager("/portal", params, next),
  );
}
