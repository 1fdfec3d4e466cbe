/**
 * classifyPostgresError(): which driver errors become which store errors (no database needed:
 * the errors are shaped as postgres.js's PostgresError, a code and a message).
 *
 * @module
 */
import assert from "node:assert/strict";
import { StoreConflict, StoreError, StoreUnavailable } from "../../src/store/errors.ts";
import { classifyPostgresError } from "../../src/store/postgres/errors.ts";

function driverError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

Deno.test("a full notification queue at COMMIT (54000) is a busy database, answered 503", () => {
  const error = driverError("54000", "too many notifications in the NOTIFY queue");
  const classified = classifyPostgresError(error);
  assert.ok(classified instanceof StoreUnavailable);
  assert.equal(classified.message, "Database busy: the notification queue is full");
  assert.equal(classified.cause, error);
});

Deno.test("a full notification queue is known by its routine in any language of the server", () => {
  const error = Object.assign(driverError("54000", "trop de notifications dans la queue NOTIFY"), {
    routine: "PreCommit_Notify",
  });
  assert.ok(classifyPostgresError(error) instanceof StoreUnavailable);
});

Deno.test("other limits of class 54 stay unclassified (a statement's own bug, not a wait)", () => {
  assert.equal(
    classifyPostgresError(driverError("54000", "index row size exceeds maximum")),
    undefined,
  );
  assert.equal(classifyPostgresError(driverError("54001", "statement is too complex")), undefined);
  assert.equal(
    classifyPostgresError(driverError("54023", "cannot pass more than 100 arguments")),
    undefined,
  );
});

Deno.test("a unique violation is a conflict, a lost connection unreachable", () => {
  assert.ok(classifyPostgresError(driverError("23505", "duplicate key")) instanceof StoreConflict);
  const lost = classifyPostgresError(driverError("CONNECTION_CLOSED", "write CONNECTION_CLOSED"));
  assert.ok(lost instanceof StoreUnavailable);
  assert.equal(lost.message, "Database unreachable");
});

Deno.test("a grant-ending write without its grant_epoch row is the store error that says so", () => {
  const error = driverError(
    "22P02",
    'invalid input syntax for type integer: "The grant_epoch row is missing"',
  );
  const classified = classifyPostgresError(error);
  assert.ok(classified instanceof StoreError && !(classified instanceof StoreUnavailable));
  assert.equal(classified.message, "The grant_epoch row is missing");
  assert.equal(classifyPostgresError(driverError("22P02", 'invalid input syntax: "x"')), undefined);
});
