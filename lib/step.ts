/**
 * `step(label, fn)`: one side effect inside a running wrapped function, remembered under
 * the call's key and the label, so that when the function is run again from the top
 * (LangGraph re-runs a tool after `interrupt()` on resume; a retry after a later failure)
 * the steps it already did return their stored results instead of running again.
 *
 * A step is a small call of its own on the call's store, through the same Store interface
 * (acquire, renew, complete, fail): it inherits the call's lease and ttl, the result rule
 * (`undefined` is kept; a result that cannot be stored is recorded as completed and is a
 * TypeError) and what a thrown value means (a failure lets the next run do the step
 * again; an abort after the step started keeps its claim, since the outcome is unknown).
 */

import { type RunningCall, running } from './call-context.js';
import { Unencodable, canonicalJson, resultJson } from './canonical.js';
import { classifyThrown } from './control-flow.js';
import { KeyMismatchError, StoreError, asStoreError } from './errors.js';
import { type Lease, keepLease } from './lease.js';
import { DEFAULT_LIMITS, resultTooLarge } from './limits.js';
import * as native from './native.js';
import type { AcquireResult, IdempotencyRecord, RecordError } from './store.js';
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

async function runStep<T>(call: RunningCall, label: string, fn: () => T): Promise<Awaited<T>> {
  const { store, leaseMs, ttlMs } = call;
  // The record's name, for inspect: a long label (a nested tool call's input) is shortened
  // there, by code points; the key and fingerprint hash the whole label.
  const points = Array.from(label);
  const shown = points.length > 120 ? `${points.slice(0, 117).join('')}...` : label;
  const name = `${call.name}.step(${JSON.stringify(shown)})`;
  // The step's key: SHA-256 over the call's key and the label (native hashing, the same as
  // a derived call key), so a step never shares a record with a call or another step.
  const both = native.callHashes(`${call.name}.step`, canonicalJson({ step: call.key }), canonicalJson(label));
  const fingerprint = both.slice(0, 64);
  const key = both.slice(64);

  const watch = new Watch(store, key);
  try {
    for (;;) {
      let claim: AcquireResult;
      const sentAt = performance.now();
      try {
        claim = await store.acquire({ key, name, fingerprint, leaseMs, ttlMs, force: false });
      } catch (err) {
        throw asStoreError(err, key);
      }
      if (claim.acquired) return await execute(call, { key, name }, claim.token, sentAt, fn);
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

function replayed<T>(record: Pick<IdempotencyRecord, 'result' | 'error'>): Awaited<T> {
  if (record.error !== null) throw new TypeError(record.error.message);
  return record.result as Awaited<T>;
}

function errorOf(thrown: unknown): RecordError {
  if (thrown instanceof Error) {
    const { name, message } = thrown;
    return { name: typeof name === 'string' ? name : 'Error', message: typeof message === 'string' ? message : '' };
  }
  let message: string;
  try {
    message = String(thrown);
  } catch {
    message = 'a value that cannot be turned into a string';
  }
  return { name: 'NonErrorThrown', message };
}

/** The result's stored text: the core's result encoder (the value's own key order), as for calls. */
const encodeResult = resultJson;

/** The core's lease keeper; a lost step lease shows when the step's complete is refused. */
function leaseFor(store: RunningCall['store'], key: string, token: string, leaseMs: number, claimedAt: number): Lease {
  return keepLease(store, key, token, leaseMs, claimedAt, () => {}, () => {});
}

async function execute<T>(call: RunningCall, self: { key: string; name: string }, token: string, claimedAt: number, fn: () => T): Promise<Awaited<T>> {
  const { store, leaseMs, ttlMs } = call;
  const { key, name } = self;
  const startedAt = performance.now();
  const lease = leaseFor(store, key, token, leaseMs, claimedAt);
  let value: Awaited<T>;
  try {
    value = await running.run({ ...call, key, name }, fn);
  } catch (thrown) {
    lease.stop();
    if (classifyThrown(thrown) !== 'aborted') {
      // A failure (or a control-flow signal raised inside the step): the next run does
      // the step again. An abort keeps the claim: the step may have had its effect, so
      // the next run waits out the lease before it takes the step over.
      try {
        await store.fail({ key, token, error: errorOf(thrown), ttlMs, durationMs: performance.now() - startedAt });
      } catch {
        // The caller gets fn's own error; the claim runs out after its lease.
      } finally {
        notify(store, key);
      }
    }
    throw thrown;
  }
  lease.stop();

  let resultJson: string | undefined;
  let unstorable: RecordError | undefined;
  if (value !== undefined) {
    try {
      resultJson = encodeResult(value);
    } catch (err) {
      if (!(err instanceof Unencodable)) throw err;
      unstorable = {
        name: 'TypeError',
        message:
          `idempotent-tools: step ${name} ran, but its result cannot be stored: ${err.pathFrom('result')} is ${err.what}. ` +
          'The step is recorded as completed and will not run again; return JSON data from the step',
      };
    }
    const tooLarge = resultJson === undefined ? undefined : resultTooLarge(resultJson, call.maxResultBytes ?? DEFAULT_LIMITS.maxResultBytes);
    if (tooLarge !== undefined) {
      resultJson = undefined;
      unstorable = {
        name: 'TypeError',
        message:
          `idempotent-tools: step ${name} ran, but its result cannot be stored: ${tooLarge}. ` +
          'The step is recorded as completed and will not run again; return less from the step, or raise the call\'s maxResultBytes',
      };
    }
  }
  try {
    await store.complete({ key, token, resultJson, error: unstorable, ttlMs, durationMs: performance.now() - startedAt });
  } catch (err) {
    throw new StoreError(
      `idempotent-tools: step ${name} ran, but its result could not be recorded (${asStoreError(err).message}). ` +
        'The step stays pending: after its lease runs out, the next run of the call does it again',
      { key, cause: err },
    );
  } finally {
    notify(store, key);
  }
  if (unstorable !== undefined) throw new TypeError(unstorable.message);
  return value;
}
