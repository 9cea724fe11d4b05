/**
 * `step(label, fn)`: one side effect inside a running wrapped function, remembered under
 * the call's key, its fingerprint and the label, so that when the function is run again from the top
 * (LangGraph re-runs a tool after `interrupt()` on resume; a retry after a later failure)
 * the steps it already did return their stored results instead of running again.
 *
 * A step is a small call of its own on the call's store, through the same Store interface
 * (acquire, renew, complete, fail): it inherits the call's lease, and its call's ttl only
 * once the call has completed (a step lives as long as its call is unfinished; see
 * `expireStepsWithCall`), settles through the call's retry path, the result rule
 * (`undefined` is kept; a result that cannot be stored is recorded as completed and is a
 * TypeError) and what a thrown value means (a failure lets the next run do the step
 * again; an abort after the step started keeps its claim, since the outcome is unknown).
 */

import { type RunningCall, STEPS_REFUSED, running } from './call-context.js';
import { canonicalJson, resultJson } from './canonical.js';
import { classifyThrown } from './control-flow.js';
import { KeyMismatchError, LeaseLostError, StoreError, UnstorableResultError, asStoreError } from './errors.js';
import { HANDED_BACK, type Lease, MAX_LATE_CLAIMS, keepLease, tooLate } from './lease.js';
import { DEFAULT_LIMITS } from './limits.js';
import * as native from './native.js';
import { type SettlingCall, errorOf, settle, unknownOutcome } from './settle.js';
import { storableResult } from './storable.js';
import type { AcquireResult, IdempotencyRecord, RecordError, RecordMeta, Store } from './store.js';
import { Watch, notify } from './wakeups.js';

/** Labels used so far by each run of a wrapped function (one label, one side effect). */
const labelsOf = new WeakMap<RunningCall, Set<string>>();

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Runs `fn` once for the running wrapped call and `label`, and stores its result; when the
 * wrapped function runs again from the top, returns the stored result instead. Inside `fn`,
 * `currentKey()` is the step's own key (unique per call and label): pass it to the
 * downstream API as its idempotency key. Outside a running wrapped call: a TypeError.
 */
export async function step<T>(label: string, fn: () => T): Promise<Awaited<T>> {
  const call = running.getStore();
  if (call === undefined) {
    throw new TypeError(
      'idempotent-tools: step() was called outside a running wrapped function. A step is remembered under ' +
        'the key of the call it runs in: call step() inside a function wrapped with idempotent() or a framework ' +
        "helper's idempotentTool() (and inside what it awaits).",
    );
  }
  if (typeof label !== 'string' || label.length === 0) {
    throw new TypeError(`idempotent-tools: step(label, fn): label must be a non-empty string, not ${label === '' ? 'an empty string' : typeof label}`);
  }
  if (LONE_SURROGATE.test(label)) {
    throw new TypeError('idempotent-tools: step(label, fn): label contains a lone UTF-16 surrogate; labels must be well-formed text');
  }
  if (typeof fn !== 'function') {
    throw new TypeError(`idempotent-tools: step("${label}", fn): fn must be a function, not ${fn === null ? 'null' : typeof fn}`);
  }
  let labels = labelsOf.get(call);
  if (labels === undefined) labelsOf.set(call, (labels = new Set()));
  if (labels.has(label)) {
    throw new TypeError(
      `idempotent-tools: step label "${label}" was used twice in one run of "${call.name}". A label names one side ` +
        'effect of the call: give each step its own label (e.g. `charge-${i}` in a loop).',
    );
  }
  labels.add(label);
  return runStep(call, label, fn);
}

/** Per run of a wrapped function: how often each automatic step label was used so far. */
const occurrencesOf = new WeakMap<RunningCall, Map<string, number>>();

/**
 * @internal For the framework helpers: runs `fn` as a step of the running wrapped call, if
 * there is one (else returns undefined). The n-th use of `base` in one run is its own step
 * (`base#n`), so two identical nested tool calls in one run are two side effects, and a
 * re-run from the top replays them in order.
 */
export function stepOfRunningCall<T>(base: string, fn: () => T): Promise<Awaited<T>> | undefined {
  const call = running.getStore();
  if (call === undefined) return undefined;
  let counts = occurrencesOf.get(call);
  if (counts === undefined) occurrencesOf.set(call, (counts = new Map()));
  const n = (counts.get(base) ?? 0) + 1;
  counts.set(base, n);
  return runStep(call, `${base}#${n}`, fn);
}

/** A step's key and fingerprint, derived from its call (key and fingerprint) and label. */
function stepIdentity(call: RunningCall, label: string, bound: boolean): { key: string; fingerprint: string } {
  // SHA-256 over the call's key, its fingerprint and the label (native hashing, the same
  // as a derived call key), so a step never shares a record with a call or another step,
  // and belongs to one call: a corrected call under the same explicit key (other
  // arguments) has steps of its own. `bound: false` is the identity of 0.1.0, which
  // hashed the key alone (read once per new step, so an upgrade never re-runs a step).
  const scope = bound ? { step: call.key, call: call.fingerprint } : { step: call.key };
  const both = native.callHashes(`${call.name}.step`, canonicalJson(scope), canonicalJson(label));
  return { fingerprint: both.slice(0, 64), key: both.slice(64) };
}

async function runStep<T>(call: RunningCall, label: string, fn: () => T): Promise<Awaited<T>> {
  const { store, leaseMs } = call;
  const refused = (store as { [STEPS_REFUSED]?: unknown })[STEPS_REFUSED];
  if (typeof refused === 'string') throw new TypeError(`idempotent-tools: ${refused}`);
  // The record's name, for inspect: a long label (a nested tool call's input) is shortened
  // there, by code points; the key and fingerprint hash the whole label.
  const points = Array.from(label);
  const shown = points.length > 120 ? `${points.slice(0, 117).join('')}...` : label;
  const name = `${call.name}.step(${JSON.stringify(shown)})`;
  const { key, fingerprint } = stepIdentity(call, label, true);
  call.steps?.add(key); // it expires with its call, once the call completes

  const watch = new Watch(store, key);
  let late = 0; // claims answered too late to run the step under, handed back unused
  try {
    for (;;) {
      let claim: AcquireResult;
      const sentAt = performance.now();
      try {
        // No ttlMs: a step lives as long as its call is unfinished (interrupted, waiting
        // for an approval, failed and to be retried), however long that is; its call's
        // completion gives it the call's expiry (expireStepsWithCall).
        // The call's meta (scope, tool call id, framework, project): `inspect --scope`
        // finds a thread's steps beside its calls. Not its arguments' preview: those are the call's.
        claim = await store.acquire({ key, name, fingerprint, leaseMs, force: false, ...stepMeta(call.meta) });
      } catch (err) {
        throw asStoreError(err, key);
      }
      if (claim.acquired) {
        const self: StepCall = { call, key, name, fingerprint, token: claim.token, attempts: claim.attempts, claimedAt: sentAt };
        if (claim.attempts === 1 && !claim.takenOver) {
          const before = await legacyOutcome(call, label);
          if (before !== undefined) return await adopt(self, before);
        }
        const outcome = await execute(self, fn);
        if (outcome !== HANDED_BACK) return outcome;
        if (++late >= MAX_LATE_CLAIMS) {
          throw new StoreError(`idempotent-tools: step ${name} did not run: ${tooLate(late, leaseMs)}`, { key });
        }
        continue;
      }
      const record = claim.record;
      if (record.fingerprint !== fingerprint) {
        throw new KeyMismatchError(`idempotent-tools: the key of step "${label}" of "${call.name}" (${key}) is held by another record, "${record.name}"`, { key });
      }
      if (record.status === 'completed') return replayed(record);
      // Pending: an earlier run of this call is doing the step now (or died doing it).
      // Wait until it settles or its lease runs out (then the acquire above takes it over):
      // a step never turns "still running" into an error.
      const left = record.leaseExpiresAt === null ? leaseMs : Math.max(record.leaseExpiresAt - Date.now(), 1);
      await watch.wait(Math.min(left, 200, Math.max(leaseMs / 3, 1)));
    }
  } finally {
    watch.close();
  }
}

/**
 * A completed call's steps expire with it: the records of the steps its run ran or
 * replayed get the call record's own `expiresAt` (read back, so that no step outlives its
 * call: a new call after the call expired must find none of the old call's steps), through
 * the store's optional `expireSettled`. A call without `ttlMs`, a store without the method:
 * nothing to do, steps are kept. Throws what the store throws; the caller decides.
 */
export async function expireStepsWithCall(store: Store, call: { key: string; fingerprint: string; steps: Set<string> }): Promise<void> {
  if (call.steps.size === 0 || store.expireSettled === undefined) return;
  const record = await store.get(call.key);
  if (record === null || record.status !== 'completed' || record.fingerprint !== call.fingerprint || record.expiresAt === null) return;
  await store.expireSettled([...call.steps], record.expiresAt);
}

/** What a step's record keeps of its call's meta: all of it but the arguments' preview. */
function stepMeta(meta: RecordMeta | undefined): { meta?: RecordMeta } {
  if (meta === undefined) return {};
  const { argsPreview: _callsArguments, ...rest } = meta;
  return Object.keys(rest).length === 0 ? {} : { meta: rest };
}

/** A step's claim, as its execution and settle need it. */
interface StepCall {
  call: RunningCall;
  key: string;
  name: string;
  fingerprint: string;
  token: string;
  attempts: number;
  claimedAt: number;
}

/** The outcome a step of this call completed under 0.1.0's identity, if any (see stepIdentity). */
async function legacyOutcome(call: RunningCall, label: string): Promise<Pick<IdempotencyRecord, 'result' | 'error'> | undefined> {
  const legacy = stepIdentity(call, label, false);
  let record: IdempotencyRecord | null;
  try {
    record = await call.store.get(legacy.key);
  } catch (err) {
    throw asStoreError(err, legacy.key);
  }
  return record !== null && record.status === 'completed' && record.fingerprint === legacy.fingerprint ? record : undefined;
}

function replayed<T>(record: Pick<IdempotencyRecord, 'result' | 'error'>): Awaited<T> {
  if (record.error !== null) throw new UnstorableResultError(record.error.message, {});
  return record.result as Awaited<T>;
}

/** The result's stored text: the core's result encoder (the value's own key order), as for calls. */
const encodeResult = resultJson;

/** The core's lease keeper; a lost step lease shows when the step's settle is refused. */
function leaseFor(self: StepCall): Lease {
  return keepLease(self.call.store, self.key, self.token, self.call.leaseMs, self.claimedAt, () => {}, () => {});
}

function settlingOf(self: StepCall): SettlingCall {
  return { store: self.call.store, key: self.key, fingerprint: self.fingerprint, leaseMs: self.call.leaseMs, emit: () => {} };
}

/** Records a legacy step's outcome under the step's own claim, and returns it. */
async function adopt<T>(self: StepCall, before: Pick<IdempotencyRecord, 'result' | 'error'>): Promise<Awaited<T>> {
  const lease = leaseFor(self);
  try {
    const resultJson = before.result === undefined ? undefined : encodeResult(before.result);
    await settleStep(self, lease, { resultJson, error: before.error ?? undefined, value: before.result }, 0);
  } finally {
    lease.stop();
    notify(self.call.store, self.key);
  }
  return replayed(before);
}

/**
 * Completes the step's claim through the call's settle path (retried, and read back when
 * an attempt's outcome is unknown). Refused (another run took the step over after this
 * one's lease ran out) or unknown after the retries: the caller must know.
 */
async function settleStep(
  self: StepCall,
  lease: Lease,
  outcome: { resultJson?: string; error?: RecordError; value: unknown },
  durationMs: number,
): Promise<void> {
  const settled = await settle(
    settlingOf(self),
    lease,
    'complete',
    { key: self.key, token: self.token, resultJson: outcome.resultJson, error: outcome.error, durationMs },
    self.attempts,
  );
  if (settled.state === 'unknown') {
    const otherwise = 'after its lease runs out, the next run of the call takes the step over and does it again';
    throw new StoreError(unknownOutcome(`step ${self.name}`, settled, otherwise), { key: self.key, cause: settled.error, outcome: 'unknown' });
  }
  if (settled.state === 'fenced') {
    throw new LeaseLostError(
      settled.gone
        ? `idempotent-tools: step ${self.name} ran, but meanwhile its record went away (cleared, or lost by the store), so ` +
            'this result was not recorded; the next run of the call does the step again'
        : `idempotent-tools: step ${self.name} ran, but meanwhile another run of the call took the step over (this run's ` +
            'lease ran out), so this result was not recorded: the stored outcome is the other run\'s. The step\'s side ' +
            'effect may have happened twice; run the call again to get the recorded outcome',
      { key: self.key, result: outcome.value },
    );
  }
}

async function execute<T>(self: StepCall, fn: () => T): Promise<Awaited<T> | typeof HANDED_BACK> {
  const { call, key, name, token } = self;
  const { store } = call;
  const startedAt = performance.now();
  const lease = leaseFor(self);
  try {
    // As for a call (idempotent.ts): a claim answered after its lease (nearly) ran out may
    // be another run's on the store already; the step's fn must not start under it.
    if (!lease.mayStart()) {
      await lease.end();
      return HANDED_BACK;
    }
    let value: Awaited<T>;
    try {
      value = await running.run({ ...call, key, name, fingerprint: self.fingerprint }, fn);
    } catch (thrown) {
      if (classifyThrown(thrown) === 'aborted') {
        // The step may have had its effect: keep the claim, so the next run waits out the
        // lease before it takes the step over.
        lease.stop();
      } else {
        // A failure (or a control-flow signal raised inside the step): the next run does
        // the step again. The caller gets fn's own error whatever the record became.
        await settle(
          settlingOf(self),
          lease,
          'fail',
          { key, token, error: errorOf(thrown), durationMs: performance.now() - startedAt },
          self.attempts,
        ).catch(() => {});
      }
      throw thrown;
    }

    const { resultJson, unstorable } = storableResult(value, call.maxResultBytes ?? DEFAULT_LIMITS.maxResultBytes, { who: `step ${name}`, kind: 'step', key: call.key });
    await settleStep(self, lease, { resultJson, error: unstorable, value }, performance.now() - startedAt);
    if (unstorable !== undefined) throw new UnstorableResultError(unstorable.message, { key: call.key });
    return value;
  } finally {
    lease.stop();
    notify(store, key);
  }
}
