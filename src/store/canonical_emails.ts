/**
 * The one form in which e-mail addresses are stored and compared, and the
 * data migration that brings rows written before it into it. Both backends
 * run {@link planCanonicalEmails} in a migration of their own, so the rule is
 * JavaScript's on both (PostgreSQL's `lower()` depends on the database's
 * locale, SQLite's knows only ASCII).
 *
 * @module
 */

/**
 * The form in which e-mail addresses are stored and compared: Unicode NFC
 * (so `é` typed as one code point or as `e` + U+0301 is one address) and
 * lower case, domain and local part alike, as keygate has always compared them.
 */
export function toCanonicalEmail(email: string): string {
  return email.normalize("NFC").toLowerCase().normalize("NFC");
}

/** A user row's id and e-mail as stored. */
export interface StoredEmail {
  id: number;
  email: string;
}

/** What the migration changes, and how many rows it leaves as they are. */
export interface CanonicalEmailPlan {
  /** Rows whose e-mail becomes its canonical form. */
  updates: StoredEmail[];
  /**
   * Rows left as stored because their canonical form is another user's
   * e-mail, or the canonical form of more than one row: which account
   * should keep the address is the operator's call.
   */
  skipped: number;
}

/** Plans the migration of every stored e-mail to {@link toCanonicalEmail}'s form. */
export function planCanonicalEmails(rows: readonly StoredEmail[]): CanonicalEmailPlan {
  const stored = new Set(rows.map((row) => row.email));
  const byCanonical = new Map<string, StoredEmail[]>();
  for (const row of rows) {
    const email = toCanonicalEmail(row.email);
    if (email === row.email) continue;
    byCanonical.set(email, [...byCanonical.get(email) ?? [], row]);
  }
  const updates: StoredEmail[] = [];
  let skipped = 0;
  for (const [email, group] of byCanonical) {
    if (stored.has(email) || group.length > 1) skipped += group.length;
    else updates.push({ id: group[0].id, email });
  }
  return { updates, skipped };
}

/** The one warning line about skipped rows; it names no address. */
export function describeSkippedEmails(skipped: number): string {
  return `${skipped} user e-mail(s) stored before e-mails were normalised were left as they are: ` +
    "their normalised form belongs to another user (see docs/operations.md, " +
    '"E-mails stored before normalisation")';
}
