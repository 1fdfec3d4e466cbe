/**
 * The store contract's conformance suite, in the shape Hono uses for its
 * routers: one set of tests, run by every backend with
 * `runStoreContract({ name, open, skip })` (see sqlite_test.ts). It uses
 * only the `Store` interface, plus `execSql` to set one state alone with
 * plain SQL, so that no store method's side effect (a revoked key revoking
 * its tokens, a disabled user's cutoff) can hide a statement that forgot a
 * condition. It pins every rule that lives in SQL: the usable key, the valid
 * token, the revoke-before cutoff, the live-token cap, expiry, the audit
 * log, retention, the grant change feed, and the admin API's operators and
 * paged views (contract_admin.ts, contract_audit_pages.ts).
 *
 * @module
 */
import type { ContractStore } from "./_contract_fixtures.ts";
import { registerAdminViewTests } from "./contract_admin.ts";
import { registerAuditPageTests } from "./contract_audit_pages.ts";
import { registerChangeTests } from "./contract_changes.ts";
import { registerLoginTests } from "./contract_logins.ts";
import { registerGrantTests } from "./contract_grants.ts";
import {
  registerPortalCodeTests,
  registerPortalKeyTests,
  registerPortalSessionTests,
  registerPortalSignUpTests,
  registerPortalUnverifiedDeletionTests,
} from "./contract_portal.ts";
import { registerPortalLateWriteTests } from "./contract_portal_late.ts";
import { registerPortalMailTests } from "./contract_portal_mail.ts";
import { registerPortalReadTests } from "./contract_portal_reads.ts";
import { registerPortalRefusalTests } from "./contract_portal_refusal.ts";
import {
  registerLimitAheadTests,
  registerLimitBatchLeaseTests,
  registerLimitChangeTests,
  registerLimitLeaseTests,
  registerLimitRuleTests,
} from "./contract_limits.ts";
import {
  registerPortalDeletionTests,
  registerPortalSafetyTests,
} from "./contract_portal_safety.ts";

export type { ContractStore } from "./_contract_fixtures.ts";

/** What a backend gives {@link runStoreContract}. */
export interface StoreContractOptions {
  /** The backend's name, in every test's name. */
  name: string;
  open(): Promise<ContractStore>;
  /** Tests this backend does not run, by name (without the prefix), each with its reason. */
  skip?: Record<string, string>;
}

/** Registers the contract's tests for one backend. */
export function runStoreContract(options: StoreContractOptions): void {
  const skip = options.skip ?? {};
  for (const [name, reason] of Object.entries(skip)) {
    if (reason.trim() === "") throw new Error(`Skipping "${name}" needs a reason`);
  }
  function test(name: string, fn: (db: ContractStore) => Promise<void>): void {
    Deno.test({
      name: `[store contract: ${options.name}] ${name}`,
      ignore: name in skip,
      async fn() {
        const db = await options.open();
        try {
          await fn(db);
        } finally {
          await db.close();
        }
      },
    });
  }

  registerGrantTests(test);
  registerChangeTests(test);
  registerLoginTests(test);
  registerAdminViewTests(test);
  registerAuditPageTests(test);
  registerPortalSignUpTests(test);
  registerPortalUnverifiedDeletionTests(test);
  registerPortalCodeTests(test);
  registerPortalSessionTests(test);
  registerPortalKeyTests(test);
  registerPortalMailTests(test);
  registerPortalReadTests(test);
  registerLimitRuleTests(test);
  registerLimitLeaseTests(test);
  registerLimitAheadTests(test);
  registerLimitBatchLeaseTests(test);
  registerLimitChangeTests(test);
  registerPortalSafetyTests(test);
  registerPortalDeletionTests(test);
  registerPortalRefusalTests(test);
  registerPortalLateWriteTests(test);
}
