/**
 * The errors a wrapped call can throw. Each has a stable `code` that tools can branch
 * on without `instanceof` (which breaks across duplicated installs of the package).
 */

export class IdempotencyError extends Error {
  readonly code: string = 'IDEMPOTENCY_ERROR';
  /** The idempotency key of the call, when there is one. */
  readonly key: string | undefined;

  constructor(message: string, options?: { key?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.key = options?.key;
  }
}

/** `onDuplicate: 'raise'` and the key is held by a live in-flight call. */
export class DuplicateInFlightError extends IdempotencyError {
  override readonly code = 'DUPLICATE_IN_FLIGHT';
}

/** `onDuplicate: 'block'` waited `pollTimeoutMs` and the in-flight call had not finished. */
export class InFlightTimeoutError extends IdempotencyError {
  override readonly code = 'IN_FLIGHT_TIMEOUT';
}

/**
 * A `'block'` wait ended because the request it served was cancelled or its client left
 * (a helper's signal fired): this call stopped waiting, and did not run; the call it waited
 * for goes on and is recorded, so a retry gets its result. Named `AbortError`, as every
 * abort is, so that the framework that aborted the request recognises its own abort.
 */
export class WaitAbandonedError extends IdempotencyError {
  override readonly code = 'WAIT_ABANDONED';
  constructor(message: string, options?: { key?: string; cause?: unknown }) {
    super(message, options);
    this.name = 'AbortError';
  }
}

/** The key is held by a record of another function or other arguments. */
export class KeyMismatchError extends IdempotencyError {
  override readonly code = 'KEY_MISMATCH';
}

/**
 * The store could not be opened, read or written. The wrapped function did not run,
 * unless `outcome` is `'unknown'`: then it ran, and whether its outcome was recorded is
 * unknown (the write may have been applied, and reading it back failed too); the message
 * says what the next call will do in either case.
 */
export class StoreError extends IdempotencyError {
  override readonly code = 'STORE_ERROR';
  /** `'unknown'`: fn ran, and whether its outcome was recorded is unknown. */
  readonly outcome: 'unknown' | undefined;

  constructor(message: string, options?: { key?: string; cause?: unknown; outcome?: 'unknown' }) {
    super(message, options);
    this.outcome = options?.outcome;
  }
}

/** Wraps whatever a store threw in a `StoreError` (keeping it as `cause`). */
export function asStoreError(err: unknown, key?: string): StoreError {
  if (err instanceof StoreError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new StoreError(message.startsWith('idempotent-tools') ? message : `idempotent-tools: ${message}`, {
    key,
    cause: err,
  });
}

/**
 * `fn` ran, but its claim had been taken over meanwhile (its lease ran out, or a
 * `'retry'` call claimed the key), so its result was not recorded: the key's record is
 * the other call's. `result` is what this run of `fn` returned, so the caller can act on
 * a side effect that happened twice (refund, cancel); calling again returns (or waits
 * for) the recorded outcome.
 */
export class LeaseLostError extends IdempotencyError {
  override readonly code = 'LEASE_LOST';
  /** What this run of `fn` returned (its result was not recorded). */
  readonly result: unknown;

  constructor(message: string, options: { key?: string; result: unknown }) {
    super(message, { key: options.key });
    this.result = options.result;
  }
}

/**
 * A tool call approved for some arguments was about to run with others (a resubmitted
 * history with edited input, two resumes that decided differently): it did not run. The
 * model gets a tool message that says so; the developer this error, as an
 * `approval-mismatch` event and a process warning.
 */
export class ApprovalMismatchError extends IdempotencyError {
  override readonly code = 'APPROVAL_MISMATCH';
}

/** A tool call whose recorded decision is a rejection was about to run: it did not. */
export class ToolCallRejectedError extends IdempotencyError {
  override readonly code = 'TOOL_CALL_REJECTED';
}

/**
 * `recordApproval` was given a decision for a call that already has another one: the first
 * decision stands (re-recording the same decision is fine).
 */
export class ApprovalConflictError extends IdempotencyError {
  override readonly code = 'APPROVAL_CONFLICT';
}

/**
 * `fn` ran (its side effect happened) but its result cannot be stored: not JSON data, a
 * value a replay would give back as something else (a `Date`), or over `maxResultBytes`. The
 * record is completed and the call never runs again; this call and every replay throw this,
 * saying how to return the result instead. A `TypeError` (what the wrapper was given is the
 * problem), with the package's `code` and the record's `key`.
 */
export class UnstorableResultError extends TypeError {
  readonly code = 'UNSTORABLE_RESULT';
  readonly key: string | undefined;

  constructor(message: string, options?: { key?: string }) {
    super(message);
    this.name = 'UnstorableResultError';
    this.key = options?.key;
  }
}
