/**
 * The web console's files (src/http/admin/console/), read once when the
 * admin handler is made and served from memory. They are plain HTML, CSS and
 * JavaScript modules: no build step, no external asset, nothing inline (see
 * the Content-Security-Policy in admin_app.ts). `deno task compile` includes
 * the folder in the binary.
 *
 * @module
 */

/** One file of the console. */
export interface ConsoleAsset {
  body: Uint8Array<ArrayBuffer>;
  contentType: string;
}

/** The console's files by URL path. */
export interface ConsoleAssets {
  find(path: string): ConsoleAsset | undefined;
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  html: "text/html; charset=utf-8",
  css: "text/css; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  svg: "image/svg+xml",
};

/** The console's files and the URL path each is served at. */
export const CONSOLE_FILES: readonly [string, string][] = [
  ["/", "index.html"],
  ["/console/console.css", "console.css"],
  ["/console/app.js", "app.js"],
  ["/console/api.js", "api.js"],
  ["/console/dom.js", "dom.js"],
  ["/console/chart.js", "chart.js"],
  ["/console/pages/shared.js", "pages/shared.js"],
  ["/console/pages/sign_in.js", "pages/sign_in.js"],
  ["/console/pages/dashboard.js", "pages/dashboard.js"],
  ["/console/pages/users.js", "pages/users.js"],
  ["/console/pages/user.js", "pages/user.js"],
  ["/console/pages/user_keys.js", "pages/user_keys.js"],
  ["/console/pages/user_settings.js", "pages/user_settings.js"],
  ["/console/pages/keys.js", "pages/keys.js"],
  ["/console/pages/audit.js", "pages/audit.js"],
  ["/console/pages/throttle.js", "pages/throttle.js"],
  ["/console/pages/limits.js", "pages/limits.js"],
  ["/console/pages/portal.js", "pages/portal.js"],
  ["/console/favicon.svg", "favicon.svg"],
];

/** Reads the console's files from `dir` (default: the console folder beside this module). */
export function loadConsoleAssets(dir = new URL("./console/", import.meta.url)): ConsoleAssets {
  const files = new Map<string, ConsoleAsset>();
  for (const [path, name] of CONSOLE_FILES) {
    const extension = name.slice(name.lastIndexOf(".") + 1);
    files.set(path, {
      body: Deno.readFileSync(new URL(name, dir)),
      contentType: CONTENT_TYPES[extension],
    });
  }
  return { find: (path) => files.get(path) };
}
