/**
 * The portal's files (src/http/portal/pages/), read once when the handler is made and served
 * from memory: plain HTML, CSS and JavaScript modules, no build step, nothing inline (see the
 * policy in portal_app.ts). `deno task compile` includes the folder in the binary.
 *
 * @module
 */

/** The portal's pages and files. */
export interface PortalAssets {
  /** URL paths of the files other than the page. */
  files: readonly string[];
  /** The one page (every `/portal/…` page is it; its script reads the path). */
  page(): Response;
  file(path: string): Response;
}

const TYPES: Readonly<Record<string, string>> = {
  html: "text/html; charset=utf-8",
  css: "text/css; charset=utf-8",
  js: "text/javascript; charset=utf-8",
};

/** The files and the URL path each is served at. */
export const PORTAL_FILES: readonly [string, string][] = [
  ["/portal/portal.css", "portal.css"],
  ["/portal/portal.js", "portal.js"],
  ["/portal/portal_api.js", "portal_api.js"],
  ["/portal/portal_dom.js", "portal_dom.js"],
  ["/portal/portal_account.js", "portal_account.js"],
];

/** Reads the files from `dir` (default: the pages folder beside this module). */
export function loadPortalAssets(dir = new URL("./pages/", import.meta.url)): PortalAssets {
  const load = (name: string) => ({
    body: Deno.readFileSync(new URL(name, dir)),
    type: TYPES[name.slice(name.lastIndexOf(".") + 1)],
  });
  const index = load("index.html");
  const files = new Map(PORTAL_FILES.map(([path, name]) => [path, load(name)]));
  const answer = (asset: { body: Uint8Array<ArrayBuffer>; type: string }) =>
    new Response(asset.body, { headers: { "content-type": asset.type } });
  return {
    files: PORTAL_FILES.map(([path]) => path),
    page: () => answer(index),
    file: (path) => answer(files.get(path)!),
  };
}
