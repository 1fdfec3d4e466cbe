/**
 * The portal's pages: the one page at each of its paths (its script reads the path) and its
 * files, served from memory (../portal_assets.ts).
 *
 * @module
 */
import type { PortalAssets } from "../portal_assets.ts";
import type { PortalRoute } from "../portal_request.ts";

/** The paths the page is served at. */
export const PAGE_PATHS: readonly string[] = [
  "/portal",
  "/portal/verify",
  "/portal/reset",
  "/portal/email",
];

/** `GET` of each page path and of each file. */
export function createPageRoutes(assets: PortalAssets): PortalRoute[] {
  return [
    ...PAGE_PATHS.map((path): PortalRoute => ({
      method: "GET",
      path,
      caller: "anyone",
      handle: () => assets.page(),
    })),
    ...assets.files.map((path): PortalRoute => ({
      method: "GET",
      path,
      caller: "anyone",
      handle: () => assets.file(path),
    })),
  ];
}
