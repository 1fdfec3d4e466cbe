/** The `.ts` files under a folder, recursively, in a stable order. */
export function walkSync(folder: URL): URL[] {
  const found: URL[] = [];
  const base = folder.href.endsWith("/") ? folder.href : `${folder.href}/`;
  const entries = [...Deno.readDirSync(folder)].sort((a, b) => a.name.localeCompare(b.name));
  for (const entry of entries) {
    const url = new URL(entry.isDirectory ? `${entry.name}/` : entry.name, base);
    if (entry.isDirectory) found.push(...walkSync(url));
    else if (entry.name.endsWith(".ts")) found.push(url);
  }
  return found;
}
