/**
 * Building the page without innerHTML: every text is a text node, so nothing
 * a user, a label or the audit log holds is ever parsed as markup.
 *
 * @module
 */

/**
 * Creates an element. `attrs` sets attributes (`class`, `for`, `aria-*`, …),
 * properties for `on*` handlers, and skips `false`/`undefined` values;
 * children are nodes, strings or arrays of them.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false || value === null) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

/**
 * Control, invisible and bidirectional characters: the same class as `UNSAFE_CHARACTERS` in
 * src/formats/printable.ts (a test keeps them equal). New names, labels and e-mails cannot hold
 * them; one stored before is shown as `\u202e` and so on, so that it cannot hide or reorder
 * what an operator reads.
 */
const UNSAFE_CHARACTERS =
  /[\p{Cc}\p{Cf}\p{Cs}\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}]|[^\S ]/gu;

/** `text` with every unsafe character written as `\u200b` (one escape per UTF-16 unit). */
export function visible(text) {
  return text.replace(
    UNSAFE_CHARACTERS,
    (c) =>
      [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`)
        .join(""),
  );
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(visible(String(child))));
  }
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let fieldCount = 0;

/** A labelled form field: `<label for>` and its input (or select). */
export function field(label, input, hint) {
  const id = input.id || `f${++fieldCount}`;
  input.id = id;
  const hintId = hint ? `${id}-hint` : undefined;
  if (hintId) input.setAttribute("aria-describedby", hintId);
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    input,
    hint ? h("small", { id: hintId, class: "hint" }, hint) : null,
  );
}

/** A time as the console shows it (local, to the second), or a dash. */
export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return h("time", { datetime: iso, title: iso }, date.toLocaleString());
}

/** Seconds in the largest unit that divides them evenly: 7200 → "2h", as the CLI writes them. */
export function duration(seconds) {
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds % size === 0) return `${seconds / size}${unit}`;
  }
  return `${seconds}s`;
}

/** A small coloured word for a state (active, revoked, …). */
export function badge(text) {
  return h("span", { class: `badge badge-${text}` }, text.replace("_", " "));
}

/** Shows a short message in the status region (read by screen readers). */
export function toast(message, kind = "ok") {
  const el = document.getElementById("toast");
  el.className = `toast toast-${kind} shown`;
  el.textContent = visible(String(message));
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.remove("shown"), 5000);
}

/**
 * Asks before a change, in a modal `<dialog>` (Escape cancels, focus stays
 * inside); resolves to whether the operator confirmed.
 */
export function confirmDialog(message, action) {
  return new Promise((resolve) => {
    const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
    const ok = h("button", { type: "submit", class: "danger" }, action);
    const dialog = h(
      "dialog",
      { class: "dialog", "aria-labelledby": "confirm-title" },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "confirm-title" }, "Please confirm"),
        h("p", {}, message),
        h("div", { class: "actions" }, cancel, ok),
      ),
    );
    let confirmed = false;
    ok.addEventListener("click", () => confirmed = true);
    cancel.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(confirmed);
    });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

/**
 * Shows a secret once, in a modal dialog with a copy button; once closed it
 * is gone from the page.
 */
export function showSecretOnce(title, explanation, secret) {
  return new Promise((resolve) => {
    const code = h("code", { id: "secret-value", class: "secret" }, secret);
    const copy = h("button", { type: "button", id: "copy-secret" }, "Copy");
    const status = h("span", { class: "copied", role: "status" });
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(secret);
        status.textContent = "Copied";
      } catch {
        const range = document.createRange();
        range.selectNodeContents(code);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        status.textContent = "Selected: press Ctrl+C to copy";
      }
    });
    const done = h("button", { type: "submit" }, "I have stored it");
    const dialog = h(
      "dialog",
      { class: "dialog", "aria-labelledby": "secret-title" },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "secret-title" }, title),
        h("p", {}, explanation),
        h("div", { class: "secret-row" }, code, copy, status),
        h("p", { class: "warning" }, "It is shown only this once: keygate stores only its digest."),
        h("div", { class: "actions" }, done),
      ),
    );
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve();
    });
    document.body.append(dialog);
    dialog.showModal();
    copy.focus();
  });
}
