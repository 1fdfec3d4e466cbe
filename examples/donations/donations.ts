/**
 * An example of the application's own secure endpoint, served by keygate in
 * the same process: `POST /api/secure/givingservice/donations` records a
 * donation by the authenticated caller and answers with a receipt number.
 *
 * keygate has already checked the API key and the access token when the
 * handler runs; the handler reads the caller from `context.principal`.
 *
 * The ledger is in memory, which is enough to show the wiring; a real
 * service would keep donations in its own database.
 *
 * @module
 */
import { readDocument } from "../../src/http/body.ts";
import type { Clock } from "../../src/platform/clock.ts";
import { parseJson } from "../../src/formats/json.ts";
import type { Format } from "../../src/formats/format.ts";
import { toResponse } from "../../src/http/respond.ts";
import type { Routes } from "../../src/http/route.ts";
import type { SecureContext } from "../../src/http/context.ts";
import { parseXml } from "../../src/formats/xml.ts";

/** The path of the example endpoint. */
export const DONATIONS_PATH = "/api/secure/givingservice/donations";

/** A donation as the caller sends it. */
export interface DonationRequest {
  projectId: string;
  /** Decimal with at most two places, e.g. `"25.00"`. */
  amount: string;
  currency: string;
}

/** A recorded donation. */
export interface Donation {
  receiptNumber: string;
  userId: number;
  email: string;
  projectId: string;
  amountCents: number;
  currency: string;
  createdAt: number;
}

const AMOUNT = /^(0|[1-9][0-9]{0,6})(\.[0-9]{1,2})?$/;
const CURRENCY = /^[A-Z]{3}$/;
const PROJECT_ID = /^[1-9][0-9]{0,9}$/;

function shapeError(detail: string): SyntaxError {
  return new SyntaxError(`Invalid donation: ${detail}`);
}

function field(record: Record<string, unknown>, name: string): string | undefined {
  const value = Object.hasOwn(record, name) ? record[name] : undefined;
  if (value === undefined) return undefined;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value !== "string") throw shapeError(`"${name}" must be a string`);
  return value;
}

/**
 * Parses a `donation` document:
 * `{"donation": {"project_id": "42", "amount": "25.00", "currency": "USD"}}` or
 * `<donation><project_id>42</project_id><amount>25.00</amount></donation>`.
 * `currency` defaults to `USD`.
 *
 * @throws {SyntaxError} for a malformed document or an invalid field.
 */
export function parseDonation(text: string, format: Format): DonationRequest {
  let record: Record<string, unknown>;
  if (format === "json") {
    const document = parseJson(text) as Record<string, unknown> | null;
    const donation = typeof document === "object" && document !== null &&
        Object.hasOwn(document, "donation")
      ? document.donation
      : undefined;
    if (typeof donation !== "object" || donation === null || Array.isArray(donation)) {
      throw shapeError('expected an object "donation"');
    }
    record = donation as Record<string, unknown>;
  } else {
    const document = parseXml(text);
    const root = document.donation;
    if (!Array.isArray(root) || root.length !== 1 || typeof root[0] === "string") {
      throw shapeError('expected root element "donation"');
    }
    record = {};
    for (const [name, values] of Object.entries(root[0])) {
      if (name === "#text") continue;
      if (!Array.isArray(values) || values.length !== 1 || typeof values[0] !== "string") {
        throw shapeError(`<${name.slice(0, 64)}> must be given once, as text`);
      }
      record[name] = values[0];
    }
  }
  const projectId = field(record, "project_id");
  const amount = field(record, "amount");
  const currency = field(record, "currency") ?? "USD";
  if (projectId === undefined || !PROJECT_ID.test(projectId)) {
    throw shapeError('"project_id" must be a project number');
  }
  if (amount === undefined || !AMOUNT.test(amount) || Number(amount) <= 0) {
    throw shapeError('"amount" must be a positive decimal with at most two places');
  }
  if (!CURRENCY.test(currency)) throw shapeError('"currency" must be an ISO 4217 code like "USD"');
  return { projectId, amount, currency };
}

/** An in-memory ledger of donations with sequential receipt numbers. */
export function createDonationLedger() {
  const donations: Donation[] = [];
  return {
    record(donation: Omit<Donation, "receiptNumber">): Donation {
      const year = new Date(donation.createdAt).getUTCFullYear();
      const receiptNumber = `GG-${year}-${String(donations.length + 1).padStart(6, "0")}`;
      const recorded = { ...donation, receiptNumber };
      donations.push(recorded);
      return recorded;
    },
    list(): readonly Donation[] {
      return donations;
    },
  };
}

/** The ledger's functions. */
export type DonationLedger = ReturnType<typeof createDonationLedger>;

function toCents(amount: string): number {
  const [whole, fraction = ""] = amount.split(".");
  return Number(whole) * 100 + Number(fraction.padEnd(2, "0"));
}

/** The example's secure routes, for `createHandler({ secureRoutes })`. */
export function createDonationRoutes(ledger: DonationLedger, clock: Clock): Routes<SecureContext> {
  return {
    [DONATIONS_PATH]: {
      async POST(request, { principal, format }) {
        const donation = await readDocument(request, parseDonation);
        const recorded = ledger.record({
          userId: principal.userId,
          email: principal.email,
          projectId: donation.projectId,
          amountCents: toCents(donation.amount),
          currency: donation.currency,
          createdAt: clock.now(),
        });
        return toResponse(format, "donation_receipt", {
          receipt_number: recorded.receiptNumber,
          project_id: recorded.projectId,
          amount: (recorded.amountCents / 100).toFixed(2),
          currency: recorded.currency,
          donor: recorded.email,
          created_at: new Date(recorded.createdAt).toISOString(),
        }, { status: 201 });
      },
    },
  };
}
