/**
 * Which addresses a deleted user's audit rows hold ({@link AuditAnonymizing}), for both
 * backends: the user's own former e-mails (the `from` of a rename or an e-mail change, whose
 * rows are the user's under its newer address) and any other address in a detail (the `to`
 * of an e-mail change asked), which is replaced but never followed (it may be another user's).
 *
 * @module
 */

/** The actions whose `from` is the user's own former e-mail. */
const RENAMES: ReadonlySet<string> = new Set(["user.renamed", "portal.email_changed"]);

/** The addresses in one of the user's rows: its former e-mails, and others to replace. */
export function readAuditAddresses(
  action: string,
  detail: Readonly<Record<string, unknown>>,
): { former: string[]; other: string[] } {
  const former: string[] = [];
  const other: string[] = [];
  for (const [key, value] of Object.entries(detail)) {
    if (typeof value !== "string" || !value.includes("@")) continue;
    if (key === "from" && RENAMES.has(action)) former.push(value);
    else other.push(value);
  }
  return { former, other };
}

/** The addresses found so far: the user's own (their rows take the opaque subject) and all. */
export interface AuditAddresses {
  own: string[];
  all: Set<string>;
}

/** The walk's start: the user's current e-mail. */
export function startAuditAddresses(email: string): AuditAddresses {
  return { own: [email], all: new Set([email]) };
}

/**
 * Adds the addresses of the rows whose subject is `user:<one of own>` (only those whose detail
 * holds an `@` need be read). The backend reads the rows of each `own[i]` in turn, until `i`
 * reaches the end (a former address appends to `own`).
 */
export function addAuditAddresses(
  found: AuditAddresses,
  rows: readonly { action: string; detail: Readonly<Record<string, unknown>> }[],
): void {
  for (const row of rows) {
    const { former, other } = readAuditAddresses(row.action, row.detail);
    for (const address of former) {
      if (!found.own.includes(address)) found.own.push(address);
      found.all.add(address);
    }
    for (const address of other) found.all.add(address);
  }
}
