/**
 * The console's entry: signs in with an operator token, then routes by the
 * URL's fragment (`#/users/3`) to a page of pages/. Links and the browser's
 * back button work; nothing reloads.
 *
 * @module
 */
import { api, ApiError, forgetToken, readToken, saveToken } from "./api.js";
import { h, replace, toast } from "./dom.js";
import { renderAudit } from "./pages/audit.js";
import { renderDashboard } from "./pages/dashboard.js";
import { renderKeys } from "./pages/keys.js";
import { renderSignIn } from "./pages/sign_in.js";
import { renderLimits } from "./pages/limits.js";
import { renderPortal } from "./pages/portal.js";
import { renderThrottle } from "./pages/throttle.js";
import { renderUser } from "./pages/user.js";
import { renderUsers } from "./pages/users.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const signOut = document.getElementById("sign-out");

/** The signed-in operator, and the timers of the page on screen. */
const session = {
  operator: null,
  get canWrite() {
    return this.operator?.role === "write";
  },
  timers: [],
  every(ms, fn) {
    this.timers.push(setInterval(fn, ms));
  },
  stopTimers() {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
  },
};

function showSignedIn(operator) {
  session.operator = operator;
  nav.hidden = false;
  signOut.hidden = false;
  replace(who, "Signed in as ", h("strong", {}, operator.name), ` (${operator.role})`);
}

function showSignedOut() {
  session.operator = null;
  nav.hidden = true;
  signOut.hidden = true;
  replace(who);
  renderSignIn(main, (token, operator) => {
    saveToken(token);
    showSignedIn(operator);
    if (location.hash === "" || location.hash === "#/") route();
    else location.hash = "#/";
  });
}

signOut.addEventListener("click", () => {
  forgetToken();
  session.stopTimers();
  showSignedOut();
  toast("Signed out");
});

async function route() {
  session.stopTimers();
  if (!session.operator) return showSignedOut();
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query);
  for (const link of nav.querySelectorAll("a")) {
    const target = link.getAttribute("href").slice(1);
    const current = target === "/" ? path === "/" || path === "" : path.startsWith(target);
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  replace(main, h("p", { class: "loading" }, "Loading…"));
  try {
    const user = /^\/users\/([0-9]+)$/.exec(path);
    if (user) await renderUser(main, session, user[1], params);
    else if (path === "/users") await renderUsers(main, session, params);
    else if (path === "/keys") await renderKeys(main, session, params);
    else if (path === "/audit") await renderAudit(main, session, params);
    else if (path === "/throttle") await renderThrottle(main, session, params);
    else if (path === "/limits") await renderLimits(main, session, params);
    else if (path === "/portal") await renderPortal(main, session, params);
    else await renderDashboard(main, session);
    main.focus({ preventScroll: true });
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      forgetToken();
      toast("Your operator token is no longer valid: sign in again", "error");
      return showSignedOut();
    }
    replace(
      main,
      h("h1", {}, "Something went wrong"),
      h("p", { class: "error", role: "alert" }, error.message),
    );
  }
}

addEventListener("hashchange", route);

const token = readToken();
if (token) {
  api("GET", "/me").then((operator) => {
    showSignedIn(operator);
    route();
  }, () => {
    forgetToken();
    showSignedOut();
  });
} else {
  showSignedOut();
}
