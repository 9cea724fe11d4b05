/**
 * Recording a call's outcome after fn ran: what a failed record keeps of any thrown
 * value, and `complete`/`fail` tried until it is known whether they happened.
 */

import { isDeepStrictEqual } from 'node:util';

import type { Lease } from './lease.js';
import type { IdempotencyRecord, RecordError, SettleRequest, Store } from './store.js';

/** What settling needs to know of the call. */
export interface SettlingCall {
  store: Store;
  key: string;
  fingerprint: string;
  leaseMs: number;
  emit: (type: 'store-error' | 'settle-retrying', extra: { error: unknown; retryingUntil?: number }) => void;
}

/** Reads one property of a thrown value without letting a getter or a proxy throw again. */
function readString(thrown: object, field: 'name' | 'message'): string | undefined {
  try {
    const value = (thrown as Record<string, unknown>)[field];
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The name and message a `failed` record keeps, from any thrown value: always two strings. */
export function errorOf(thrown: unknown): RecordError {
  if (thrown !== null && (typeof thrown === 'object' || typeof thrown === 'function')) {
    let isError = false;
    try {
      isError = thrown instanceof Error;
    } catch {
      // a proxy whose getPrototypeOf trap throws
    }
    const name = readString(thrown, 'name') || (isError ? 'Error' : 'NonErrorThrown');
    let message = readString(thrown, 'message');
    if (message === undefined) {
      try {
        message = String(thrown);
      } catch {
        message = 'a value that cannot be turned into a string';
      }
    }
    return { name, message };
  }
  let message: string;
  try {
    message = String(thrown);
  } catch {
    message = 'a value that cannot be turned into a string';
  }
  return { name: 'NonErrorThrown', message };
}

/** Lone surrogates replaced: the text a store that refuses them still keeps (a failed record's error is for reading). */
function wellFormedError(error: RecordError): RecordError {
  const fix = (s: string) => ((s as unknown as { toWellFormed?: () => string }).toWellFormed?.() ?? s);
  return { name: fix(error.name), message: fix(error.message) };
}

/**
 * What a settle came to: recorded, refused because another call holds the record, or
 * unknown after retries (`seen`: the last read of the record found it still pending, or
 * could not read it).
 */
export type Settled =
  | { state: 'recorded' }
  /** Refused: another claim holds the record, or (`gone`) the record was no longer there. */
  | { state: 'fenced'; gone?: boolean }
  /**
   * `leaseRefused`: a renewal of the lease was refused meanwhile. That is no takeover seen:
   * this settle's own write, applied with its reply lost, ends the claim just as a
   * takeover would, and refuses the renewals that come after it.
   */
  | { state: 'unknown'; error: unknown; seen: 'pending' | 'unreadable'; leaseRefused: boolean };

/**
 * The message of a settle whose outcome is unknown: `who` ran, and its write was never
 * confirmed: it may still be applied (a reply lost, a write that is late), so neither a
 * loss nor a success is stated, only what was seen and what the next call does in each
 * case (`otherwise`).
 */
export function unknownOutcome(who: string, settled: Extract<Settled, { state: 'unknown' }>, otherwise: string): string {
  const { error, seen, leaseRefused } = settled;
  const cause = error instanceof Error ? error.message.replace(/^idempotent-tools: /, '') : String(error);
  const read = seen === 'pending' ? 'the record, read back, was still pending' : 'reading the record back failed too';
  const renewal = leaseRefused
    ? ' A renewal of its lease was refused meanwhile: the write was applied, or another call took the record over.'
    : '';
  return (
    `idempotent-tools: ${who} ran, but whether its result was recorded is unknown: the store did not confirm the write ` +
    `(${cause}), and ${read}.${renewal} If the write was (or is still) applied, the next call with this key returns its result; ` +
    `if not, the record stays pending: ${otherwise}`
  );
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * `complete` or `fail`, tried until it is known to have happened or not: a failed
 * attempt (a lock held past the busy timeout, a Redis timeout, a failover) is retried
 * with backoff while the lease is held (it is renewed meanwhile), and before each retry
 * the record is read, because a write that timed out may have been applied.
 */
export async function settle(
  call: SettlingCall,
  lease: Lease,
  op: 'complete' | 'fail',
  request: SettleRequest,
  attempts: number,
): Promise<Settled> {
  const { leaseMs, store, emit } = call;
  lease.settling();
  const giveUpAt = performance.now() + Math.max(leaseMs, 1000);
  const lastChance = performance.now() + 4 * Math.max(leaseMs, 1000);
  let delay = 20;
  for (let attempt = 1; ; attempt++) {
    // A store that refuses a lone surrogate in the error text still gets a `failed` record.
    const req = op === 'fail' && attempt > 1 && request.error ? { ...request, error: wellFormedError(request.error) } : request;
    try {
      if (await store[op](req)) return { state: 'recorded' };
      // Refused (rare): one read says why, so the caller is told what was seen.
      const seen = await recordSays(call, op, attempts, req);
      // Refused at the first try: nothing of ours was sent before, so the record is another
      // claim's whatever it looks like (after the record was lost and claimed again, that
      // claim's attempts and fingerprint are ours too); the read only tells gone from taken.
      if (attempt === 1) return fenced(seen);
      // Refused after an attempt that errored: the refusal may be that attempt's own write,
      // applied after all (a reply that timed out). The record tells; when it cannot be
      // read, nobody has seen another call take it over, so the outcome is unknown.
      if (seen === undefined) {
        return { state: 'unknown', error: new Error(`the store refused the ${op} sent again`), seen: 'unreadable', leaseRefused: lease.lost };
      }
      return seen === 'recorded' ? { state: 'recorded' } : fenced(seen);
    } catch (err) {
      emit('store-error', { error: err });
      const seen = await recordSays(call, op, attempts, req);
      if (seen === 'recorded') return { state: 'recorded' };
      if (seen === 'fenced' || seen === 'gone') return fenced(seen);
      // A refused renewal (lease.lost) is not read as a takeover here: this settle's own
      // write, applied with its reply lost, refuses the renewals after it too. Only the
      // record, read, or a resend refused and then read, tells the two apart.
      // Retried for max(leaseMs, 1 s), and on for as long as the claim is ours by this
      // process's own record of its last claim or renewal (renewals may fail meanwhile,
      // for the same cause), up to 4 times that: a try after the lease's end is harmless
      // (fenced if another call took the record over meanwhile) and often succeeds.
      const now = performance.now();
      const until = Math.max(giveUpAt, Math.min(lease.heldUntil, lastChance));
      if (now >= until - 1) {
        return { state: 'unknown', error: err, seen: seen === 'pending' ? 'pending' : 'unreadable', leaseRefused: lease.lost };
      }
      // Said once, so a caller that waits (up to the lease's end, about leaseMs) knows why.
      if (attempt === 1) emit('settle-retrying', { error: err, retryingUntil: Date.now() + (until - now) });
      await sleep(Math.min(delay, until - 1 - now));
      delay = Math.min(delay * 2, 1000);
    }
  }
}

/** A refusal, as `settle` answers it: `gone` when the record was no longer there. */
function fenced(seen: 'recorded' | 'fenced' | 'gone' | 'pending' | undefined): Settled {
  return seen === 'gone' ? { state: 'fenced', gone: true } : { state: 'fenced', gone: false };
}

/**
 * What the record says about this claim's settle: done, taken by another claim, gone, or
 * not yet (undefined: it could not be read). A function of its own rather than a closure
 * in `settle`: a read is needed only when a settle is refused or fails, and every call
 * settles (issue 39: allocation per call).
 *
 * A record holds no token, so a settled record is taken for this settle's own only when
 * its attempts, fingerprint and outcome are this settle's: a record lost while its owner
 * ran (cleared, a Redis restart without persistence) and claimed again has the same
 * attempts (1) and fingerprint, and only its outcome differs. When the outcomes are equal
 * too, the caller's answer is the recorded one either way.
 */
async function recordSays(
  call: SettlingCall,
  op: 'complete' | 'fail',
  attempts: number,
  request: SettleRequest,
): Promise<'recorded' | 'fenced' | 'gone' | 'pending' | undefined> {
  let record: IdempotencyRecord | null;
  try {
    record = await call.store.get(call.key);
  } catch {
    return undefined;
  }
  if (record === null) return 'gone';
  if (record.attempts !== attempts || record.fingerprint !== call.fingerprint) return 'fenced';
  if (record.status === (op === 'complete' ? 'completed' : 'failed')) return sameOutcome(record, request) ? 'recorded' : 'fenced';
  return record.status === 'pending' ? 'pending' : 'fenced';
}

/** Whether a settled record holds the outcome `request` would write (its result, or its error). */
function sameOutcome(record: IdempotencyRecord, request: SettleRequest): boolean {
  if (request.error !== undefined) {
    // The text a store that refuses lone surrogates keeps is the well-formed one.
    const mine = wellFormedError(request.error);
    const theirs = record.error === null ? null : wellFormedError(record.error);
    return theirs !== null && theirs.name === mine.name && theirs.message === mine.message;
  }
  if (record.error !== null) return false;
  if (request.resultJson === undefined) return record.result === undefined;
  let mine: unknown;
  try {
    mine = JSON.parse(request.resultJson);
  } catch {
    return false;
  }
  return isDeepStrictEqual(mine, record.result);
}
