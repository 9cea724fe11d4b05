/**
 * What happened to each call, for logs and metrics: published on the
 * `node:diagnostics_channel` channel `idempotent-tools:call` and passed to the
 * `onEvent` option. Building an event costs nothing when nobody listens.
 */

import diagnostics_channel from 'node:diagnostics_channel';

export type IdempotencyEventType =
  /** `fn` ran and its result was recorded. */
  | 'executed'
  /** A stored result was returned; `fn` did not run. */
  | 'replayed'
  /** `fn` threw; the record is `failed` and the next call runs again. */
  | 'failed'
  /** The key was held by a live call (`raise` threw, `block` started waiting). */
  | 'in-flight'
  /** This call took over a record whose owner's lease had run out. */
  | 'taken-over'
  /** `fn` ran, but another caller took the record over meanwhile: its result was not recorded. */
  | 'lease-lost'
  /** The key was held by a record of other arguments. */
  | 'key-mismatch'
  /** The store failed. */
  | 'store-error'
  /**
   * fn ran, and recording its outcome failed (the store is down or slow): the call retries
   * the write until `retryingUntil` (about its lease's end, `leaseMs`), so that a short
   * outage makes nothing run twice, and only then throws. Once per call.
   */
  | 'settle-retrying'
  /** `reconcile` said the taken-over attempt's side effect happened: its result was recorded, fn did not run. */
  | 'reconciled'
  /** fn threw a framework's control-flow signal (LangGraph's interrupt): not a failure; the record is
   * settled so the re-run goes ahead, and the signal reaches the caller unchanged. */
  | 'interrupted'
  /** fn was aborted after it started: its outcome is unknown, so the record stays pending
   * (for reconcile, or for a takeover after the lease) and the abort reaches the caller. */
  | 'aborted'
  /** An approval of a tool call was recorded (`key` is the decision's record, `decision` says which). */
  | 'approved'
  /** An approval with edited arguments was recorded. */
  | 'edited'
  /** A rejection of a tool call was recorded. */
  | 'rejected'
  /** A guarded tool call whose decision is a rejection was about to run: it did not (`error` is a ToolCallRejectedError). */
  | 'refused'
  /** A tool call approved for other arguments was about to run: it did not (`error` is an ApprovalMismatchError). */
  | 'approval-mismatch';

export interface IdempotencyEvent {
  type: IdempotencyEventType;
  /**
   * The record's key when the caller gave it (withKey, the `key` option, a business key);
   * for a key derived from the arguments, its keyed id (`keyId`), never the derived key
   * itself: that is an unsalted hash of the arguments, which a reader of traces could
   * reverse by guessing. `idempotent-tools inspect --key` takes either.
   */
  key: string;
  /** The keyed id of the record's key (`kid_` + 24 hex digits, an HMAC under a secret kept in the
   * store), on every call's event; an approval decision's event names its record by `key` alone
   * (a decision's key holds the tool, the call id and a digest, nothing of the arguments). */
  keyId?: string;
  name: string;
  /** Milliseconds from the start of the call. */
  durationMs: number;
  /** The record's attempt count, when known. */
  attempts?: number;
  error?: unknown;
  /** For the approval events: the decision (approve, edit, reject). */
  decision?: 'approve' | 'edit' | 'reject';
  /** For `settle-retrying`: until when (epoch ms) the call retries recording its outcome before it throws. */
  retryingUntil?: number;
}

export const CHANNEL_NAME = 'idempotent-tools:call';
/** @internal Not in the published types: they would name `node:diagnostics_channel` (see call-context.ts). */
export const channel = diagnostics_channel.channel(CHANNEL_NAME);

export type EventSink = ((event: IdempotencyEvent) => void) | undefined;

export function listening(onEvent: EventSink): boolean {
  return onEvent !== undefined || channel.hasSubscribers;
}

export function publish(onEvent: EventSink, event: IdempotencyEvent): void {
  if (channel.hasSubscribers) channel.publish(event);
  if (onEvent !== undefined) {
    try {
      onEvent(event);
    } catch {
      // A listener's bug must not change what the call does.
    }
  }
}
