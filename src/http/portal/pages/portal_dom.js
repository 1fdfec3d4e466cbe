// The portal page's DOM helpers: elements built with textContent only (no markup is parsed),
// form cards that report the API's message, and the toast.

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

export function toast(message) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.classList.add("shown");
  setTimeout(() => box.classList.remove("shown"), 4000);
}

export function field(id, label, type = "text", value = "", extra = {}) {
  return el(
    "label",
    { for: id },
    el("span", { text: label }),
    el("input", { id, name: id, type, value, required: "", ...extra }),
  );
}

export function form(id, title, fields, submitText, onSubmit, footer = []) {
  const status = el("p", { class: "status", role: "alert", id: `${id}-status` });
  const node = el(
    "form",
    {
      id,
      class: "card",
      onsubmit: async (event) => {
        event.preventDefault();
        status.textContent = "";
        const values = Object.fromEntries(new FormData(node));
        try {
          await onSubmit(values, status);
        } catch (error) {
          status.textContent = error.message;
        }
      },
    },
    el("h1", { text: title }),
    ...fields,
    el("button", { type: "submit", id: `${id}-submit`, text: submitText }),
    status,
    ...footer,
  );
  return node;
}

export function link(href, text) {
  return el("a", { href, text });
}
