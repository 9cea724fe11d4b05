/**
 * The call protocol: what one wrapped call does with its key's record (the table in
 * the README). Store-agnostic: everything atomic happens inside `store.acquire`.
 */

import { withArgsPreview } from './args-preview.js';
import { running } from './call-context.js';
import { Unencodable, canonicalArgsJson, canonicalJson } from './canonical.js';
import { checkArgsSize, checkKeySize } from './limits.js';
import { storableResult } from './storable.js';
import { classifyThrown } from './control-flow.js';
import {
  DuplicateInFlightError,
  InFlightTimeoutError,
  KeyMismatchError,
  LeaseLostError,
  StoreError,
  UnstorableResultError,
  WaitAbandonedError,
  asStoreError,
} from './errors.js';
import { clearCommand } from './shell.js';
import { RefusedInputError } from './refused-input.js';
import { crashPoint } from './fault.js';
import { pace } from './pacing.js';
import { checkCallKey } from './reserved.js';
import { type IdempotencyEvent, type IdempotencyEventType, listening, publish } from './events.js';
import { cachedKeyIdSecret, keyForTelemetry, keyIdSecret, keyIdWith } from './key-id.js';
import { HANDED_BACK, type Lease, MAX_LATE_CLAIMS, keepLease, tooLate } from './lease.js';
import { WRAPS, claimName, followDefault, placeOf } from './names.js';
import * as native from './native.js';
import { type Config, type IdempotentOptions, type ReconcileOutcome, type WaitSignal, asWaitSignal, resolveOptions } from './options.js';
import { type SettlingCall, errorOf, settle, unknownOutcome } from './settle.js';
import { expireStepsWithCall } from './step.js';
import { defaultStore, defaultStoreGeneration, defaultStorePlace } from './default-store.js';
import { type AcquireResult, type IdempotencyRecord, type RecordMeta, REPLAY_DERIVED, type ReplayDerived, type Store, replayedAnswer } from './store.js';
import { Watch, notify } from './wakeups.js';

type Fn<A extends unknown[], R> = (...args: A) => R;

export type IdempotentFunction<A extends unknown[], R> = ((...args: A) => Promise<Awaited<R>>) & {
  /** One call under an explicit key, stored under that exact string. */
  withKey(key: string): (...args: A) => Promise<Awaited<R>>;
  /** The key that a call with these arguments would use. */
  keyFor(...args: A): string;
};

type Emit = (type: IdempotencyEventType, extra?: Partial<IdempotencyEvent>) => void;

/** One call in progress: what every step of the protocol below needs. */
interface Call<A extends unknown[], R> {
  c: Config<A>;
  store: Store;
  fn: Fn<A, R>;
  args: A;
  key: string;
  fingerprint: string;
  /** The key was derived from the arguments: messages do not print it (errors end up in logs). */
  derived: boolean;
  emit: Emit;
  /** The keys of the steps this run ran or replayed: they expire with the call (step.ts). */
  steps: Set<string>;
  /** The `meta` option's answer, as the claim records it (its steps record it too). */
  meta?: RecordMeta;
}

/** The call's key as error messages show it: a given key as given; a derived one not at all (see key-id.ts). */
function keyInMessage(call: { key: string; derived: boolean }): string {
  return call.derived ? 'key (derived from these arguments; error.key has it)' : `key ${call.key}`;
}

interface Identity {
  key: string;
  fingerprint: string;
  /** The key is a hash of the arguments (not given by withKey or the key option). */
  derived: boolean;
}

/** Wraps `fn` so that a repeated call returns the first call's stored result. */
export function idempotent<A extends unknown[], R>(
  fn: Fn<A, R>,
  options?: IdempotentOptions<A>,
): IdempotentFunction<A, R> {
  const config = resolveOptions<A>(fn, options);
  // A wrapper built on this one (idempotentTx) names the user's own function.
  const own = (options as { [WRAPS]?: unknown } | undefined)?.[WRAPS];
  const named = typeof own === 'function' ? own : fn;
  // The name is taken where the records go: without `store`, where the default store's
  // records live (the same registry as a wrapper given that store itself).
  let claimedOn = config.store !== undefined ? placeOf(config.store) : defaultStorePlace();
  claimName(named, config.name, claimedOn);
  if (config.store === undefined) followDefault(named, config.name);
  // Without `store`: the default store, looked up at the first call, and again after a
  // setDefaultStore (a generation count, so the hot path reads no environment).
  let store = config.store;
  let seen = -1;
  const resolveStore = (): Store => {
    if (config.store !== undefined) return config.store;
    const generation = defaultStoreGeneration();
    if (store === undefined || seen !== generation) {
      const next = defaultStore();
      // The default moved (setDefaultStore, or another environment): the name must be
      // free there too, before anything runs.
      const place = placeOf(next);
      if (place !== claimedOn) {
        claimName(named, config.name, place);
        claimedOn = place;
      }
      store = next;
      seen = generation;
    }
    return store;
  };

  const call = (explicitKey: string | undefined, args: A) => runCall(config, resolveStore, fn, explicitKey, args);
  const wrapped = ((...args: A) => call(undefined, args)) as IdempotentFunction<A, R>;
  Object.defineProperty(wrapped, 'name', { value: config.name });
  wrapped.withKey = (key: string) => {
    checkKey(key, 'withKey(key)');
    return (...args: A) => call(key, args);
  };
  wrapped.keyFor = (...args: A) => identify(config, undefined, args).key;
  return wrapped;
}

function checkKey(key: unknown, where: string): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new TypeError(`idempotent-tools: ${where} must be a non-empty string, not ${key === '' ? 'an empty string' : typeof key}`);
  }
  checkCallKey(key, where); // the package's own records (the keyed-id secret, approvals) are not calls
}

function encodeOrThrow<V>(value: V, encode: (value: V) => string, root: string, name: string): string {
  try {
    return encode(value);
  } catch (err) {
    if (!(err instanceof Unencodable)) throw err;
    throw new TypeError(
      `idempotent-tools: cannot derive a key for "${name}": ${err.pathFrom(root)} is ${err.what}. ` +
        'Pass an explicit key (wrapped.withKey(key)(...args) or the "key" option), or pick the data ' +
        'that identifies the call with the "payload" option.',
      { cause: err },
    );
  }
}

/** `f(a)` and `f(a, undefined)` are one call: trailing `undefined` arguments are left out. */
function trimmed(args: unknown[]): unknown[] {
  let n = args.length;
  while (n > 0 && args[n - 1] === undefined) n--;
  return n === args.length ? args : args.slice(0, n);
}

function identify<A extends unknown[]>(c: Config<A>, explicitKey: string | undefined, args: A): Identity {
  let key = explicitKey;
  if (key === undefined && c.key !== undefined) {
    key = c.key(...args);
    checkKey(key, 'the "key" option\'s return value');
  }
  if (key !== undefined) checkKeySize(key, c.limits, c.name);
  const payload = c.payload !== undefined ? c.payload(...args) : trimmed(args);
  if (key !== undefined) {
    // An explicit key is often given because the arguments are not data; then the
    // fingerprint covers the name only.
    let payloadJson: string | null = null;
    try {
      payloadJson = canonicalJson(payload);
    } catch (err) {
      if (!(err instanceof Unencodable)) throw err;
    }
    if (payloadJson !== null) checkArgsSize(payloadJson, c.limits, c.name, c.payload !== undefined ? 'payload' : 'arguments');
    return { key, fingerprint: native.fingerprint(c.name, payloadJson), derived: false };
  }
  return derivedIdentity(c.name, derivedInputs(c, args, payload));
}

/** What a derived key is made of: the call's payload and context as canonical JSON, checked. */
interface DerivedInputs {
  payloadJson: string;
  contextJson: string | null;
}

function derivedInputs<A extends unknown[]>(c: Config<A>, args: A, payload: unknown): DerivedInputs {
  if (payload === undefined) {
    throw new TypeError(`idempotent-tools: the "payload" option of "${c.name}" returned undefined; return the data that identifies the call`);
  }
  // The wrapper's own argument list needs no check of the array itself (see canonicalArgsJson).
  const payloadJson =
    c.payload !== undefined
      ? encodeOrThrow(payload, canonicalJson, 'payload', c.name)
      : encodeOrThrow(payload as unknown[], canonicalArgsJson, 'args', c.name);
  checkArgsSize(payloadJson, c.limits, c.name, c.payload !== undefined ? 'payload' : 'arguments');
  let contextJson: string | null = null;
  if (c.context !== undefined) {
    const context = c.context(...args);
    if (context === undefined) {
      // Most likely a missing thread or run id: without a scope, calls of different
      // threads would share keys.
      throw new TypeError(`idempotent-tools: the "context" option of "${c.name}" returned undefined; return the scope of the call (a thread or run id)`);
    }
    contextJson = encodeOrThrow(context, canonicalJson, 'context', c.name);
    checkArgsSize(contextJson, c.limits, c.name, 'context');
  }
  return { payloadJson, contextJson };
}

function derivedIdentity(name: string, { payloadJson, contextJson }: DerivedInputs): Identity {
  const both = native.callHashes(name, contextJson, payloadJson);
  return { key: both.slice(64), fingerprint: both.slice(0, 64), derived: true };
}

/** Stands in for a store's key-id secret that could not be read: ids then resolve nowhere, but never reveal a key. */
const UNRESOLVABLE_SECRET = native.fingerprint(`unresolvable:${Math.random()}:${Date.now()}`, null);

/**
 * The store's key-id secret, for events: read once per store object (the first listened
 * call waits for it; later ones have it at once). A store that cannot give it (an outage
 * the call itself will meet) gets ids nobody can resolve, never the derived key.
 */
async function telemetrySecret(store: Store): Promise<string> {
  try {
    return (await keyIdSecret(store)) ?? UNRESOLVABLE_SECRET;
  } catch {
    return UNRESOLVABLE_SECRET;
  }
}

async function runCall<A extends unknown[], R>(
  c: Config<A>,
  resolveStore: () => Store,
  fn: Fn<A, R>,
  explicitKey: string | undefined,
  args: A,
): Promise<Awaited<R>> {
  const startedAt = listening(c.onEvent) ? performance.now() : 0;
  let identity: Identity;
  let found: Store | undefined;
  let peeked = false;
  if (explicitKey === undefined && c.key === undefined && startedAt === 0) {
    // A derived key, and nobody listens for events: a store that can (SQLite) hashes the
    // call and reads a completed record in one synchronous step; a replay ends here.
    const inputs = derivedInputs(c, args, c.payload !== undefined ? c.payload(...args) : trimmed(args));
    found = resolveStore();
    const answer = (found as { [REPLAY_DERIVED]?: ReplayDerived })[REPLAY_DERIVED]?.(c.name, inputs.contextJson, inputs.payloadJson);
    if (answer != null) return replayedAnswer(answer) as Awaited<R>;
    peeked = answer === null;
    identity = derivedIdentity(c.name, inputs);
  } else {
    identity = identify(c, explicitKey, args);
  }
  const { key, fingerprint, derived } = identity;
  const store = found ?? resolveStore();
  // Events name the record by a keyed id, never by a derived key (see key-id.ts).
  let secret = listening(c.onEvent) ? (cachedKeyIdSecret(store) ?? (await telemetrySecret(store))) : undefined;
  const emit: Emit = (type, extra) => {
    if (listening(c.onEvent)) {
      secret ??= cachedKeyIdSecret(store) ?? UNRESOLVABLE_SECRET; // a listener that came mid-call
      publish(c.onEvent, {
        type,
        key: keyForTelemetry(secret, key, derived),
        keyId: keyIdWith(secret, key),
        name: c.name,
        durationMs: performance.now() - startedAt,
        ...extra,
      });
    }
  };
  const call: Call<A, R> = { c, store, fn, args, key, fingerprint, derived, emit, steps: new Set() };

  // The replay fast path: a store that can read a completed record without waiting
  // (SQLite in WAL mode) answers here, with no trip through the async machinery. Any
  // other case (a miss, pending, another fingerprint) is decided by acquire below.
  const hit = peeked ? null : store.peekReplay?.(key, fingerprint);
  if (hit) return replayed(call, hit);

  // 'block' subscribes to in-process settles before its first look at the store.
  const watch = c.onDuplicate === 'block' ? new Watch(store, key) : undefined;
  try {
    return await claimOrWait(call, watch);
  } finally {
    watch?.close();
  }
}

async function claimOrWait<A extends unknown[], R>(call: Call<A, R>, watch: Watch | undefined): Promise<Awaited<R>> {
  const { c, store, key, fingerprint, emit } = call;
  const deadline = Date.now() + c.pollTimeoutMs;
  const meta = c.meta === undefined ? undefined : metaOf(call);
  call.meta = meta; // its steps' records say where the call came from too
  let waited = false;
  // The request this call serves: when it is cancelled or its client leaves, a wait ends.
  const signal = watch === undefined || c.waitSignal === undefined ? undefined : asWaitSignal(c.waitSignal(...call.args));
  // Claims of ours answered too late to run fn under (see lease.ts), handed back unused.
  const late = { count: 0, attempts: 0, takenOver: false };
  for (;;) {
    let claim: AcquireResult;
    const sentAt = performance.now();
    try {
      claim = await store.acquire({
        key,
        name: c.name,
        fingerprint,
        leaseMs: c.leaseMs,
        ttlMs: c.ttlMs,
        force: c.onDuplicate === 'retry',
        meta: withArgsPreview(meta, c.preview, call.args),
      });
    } catch (err) {
      if (err instanceof RefusedInputError) throw err; // bad input, not a store failure
      emit('store-error', { error: err });
      throw asStoreError(err, key);
    }
    // A burst of replies resumes over several turns of the loop. Awaited only when told to
    // wait (an await of nothing costs every call one more microtask hop).
    const paced = pace();
    if (paced !== undefined) await paced;
    if (claim.acquired) {
      // A claim right after our own handed-back one took over nothing but that unused claim:
      // reconcile is asked only if the handed-back claim was itself a takeover.
      const takenOver = late.count > 0 && claim.attempts === late.attempts + 1 ? late.takenOver : claim.takenOver;
      const outcome = await execute(call, claim.token, claim.attempts, takenOver, sentAt);
      if (outcome !== HANDED_BACK) return outcome;
      late.count++;
      late.attempts = claim.attempts;
      late.takenOver = takenOver;
      if (late.count >= MAX_LATE_CLAIMS) {
        throw new StoreError(`idempotent-tools: "${c.name}" did not run: ${tooLate(late.count, c.leaseMs)}`, { key });
      }
      continue;
    }
    const record = claim.record;
    if (record.status === 'completed' || record.fingerprint !== fingerprint) {
      return replay(call, record);
    }
    if (!waited) emit('in-flight', { attempts: record.attempts });
    if (watch === undefined) {
      throw new DuplicateInFlightError(
        `idempotent-tools: a call of "${c.name}" with this ${keyInMessage(call)} is already in flight; ` +
          'retry later, or wrap with onDuplicate: "block" to wait for its result',
        { key },
      );
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new InFlightTimeoutError(
        `idempotent-tools: waited ${c.pollTimeoutMs} ms for the in-flight call of "${c.name}" with this ${keyInMessage(call)} to finish; ` +
          'it is still running (raise pollTimeoutMs to wait longer)',
        { key },
      );
    }
    waited = true;
    if (signal?.aborted) throw abandoned(call, signal);
    await watch.wait(Math.min(c.pollIntervalMs, left), signal);
    // Its request is gone: nobody reads this call's answer, so it stops asking the store.
    if (signal?.aborted) throw abandoned(call, signal);
  }
}

function abandoned<A extends unknown[], R>(call: Call<A, R>, signal: WaitSignal): WaitAbandonedError {
  return new WaitAbandonedError(
    `idempotent-tools: stopped waiting for the in-flight call of "${call.c.name}" with this ${keyInMessage(call)}: ` +
      'the request this call served was cancelled, or its client left. The call in flight goes on, and its result is recorded for a retry',
    { key: call.key, cause: signal.reason },
  );
}

/** A record that stands in the way: its stored outcome, or a mismatch. */
function replay<A extends unknown[], R>(call: Call<A, R>, record: IdempotencyRecord): Awaited<R> {
  const { c, emit } = call;
  if (record.fingerprint !== call.fingerprint) {
    emit('key-mismatch', { attempts: record.attempts });
    const who = record.name === c.name ? `"${c.name}" with other arguments` : `another function, "${record.name}"`;
    throw new KeyMismatchError(
      `idempotent-tools: key ${record.key} is already used by a call of ${who}; ` +
        'a key must identify exactly one call. Use another key, or remove the old record ' +
        `(${clearCommand(record.key)}) if it is truly stale`,
      { key: record.key },
    );
  }
  return replayed(call, record);
}

/** Returns a completed record's stored result (or throws its unstorable-result error). */
function replayed<A extends unknown[], R>(call: Call<A, R>, outcome: Pick<IdempotencyRecord, 'result' | 'error' | 'attempts'>): Awaited<R> {
  call.emit('replayed', { attempts: outcome.attempts });
  if (outcome.error !== null) throw new UnstorableResultError(outcome.error.message, { key: call.key });
  return outcome.result as Awaited<R>;
}

/** Where the call comes from, for `inspect`: the `meta` option's answer, with the store's project. */
function metaOf<A extends unknown[], R>(call: Call<A, R>): RecordMeta | undefined {
  const given = call.c.meta!(...call.args);
  if (given === undefined) return undefined;
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw new TypeError(`idempotent-tools: the "meta" option of "${call.c.name}" must return an object such as { scope, toolCallId }, or undefined`);
  }
  const project = (call.store as { namespace?: unknown }).namespace;
  return typeof project === 'string' && project !== '' && given.project === undefined ? { project, ...given } : given;
}

function settling<A extends unknown[], R>(call: Call<A, R>): SettlingCall {
  return { store: call.store, key: call.key, fingerprint: call.fingerprint, leaseMs: call.c.leaseMs, emit: call.emit };
}

async function execute<A extends unknown[], R>(
  call: Call<A, R>,
  token: string,
  attempts: number,
  takenOver: boolean,
  sentAt: number,
): Promise<Awaited<R> | typeof HANDED_BACK> {
  const { c, store, fn, args, key, emit } = call;
  crashPoint('after-acquire');
  const lease = keepLease(
    store,
    key,
    token,
    c.leaseMs,
    sentAt,
    () => emit('lease-lost', { attempts }),
    (error) => emit('store-error', { attempts, error }),
  );
  const durationMs = () => performance.now() - sentAt;
  try {
    // A claim answered after its lease (nearly) ran out may already be another caller's on
    // the store: fn must not start under it. Handed back unused, so the caller re-reads.
    if (!lease.mayStart()) return await handBack(lease);
    if (takenOver) emit('taken-over', { attempts });
    if (takenOver && c.reconcile !== undefined) {
      const reconciled = await askReconcile(call, lease, token, attempts, durationMs);
      if (reconciled.happened) return reconciled.value as Awaited<R>;
      if (!lease.mayStart()) return await handBack(lease);
    }

    let value: Awaited<R>;
    try {
      value = await running.run(
        { key, fingerprint: call.fingerprint, name: c.name, store, leaseMs: c.leaseMs, maxResultBytes: c.limits.maxResultBytes, steps: call.steps, meta: call.meta },
        () => fn(...args),
      );
    } catch (thrown) {
      await settleThrown(call, lease, token, attempts, thrown, durationMs);
      throw thrown;
    }
    crashPoint('after-fn');
    return await record(call, lease, token, attempts, value, durationMs, 'executed');
  } finally {
    lease.stop();
    notify(store, key);
  }
}

/** Ends a claim that fn never ran under, so that the next claim (ours or another caller's) takes it over at once. */
async function handBack(lease: Lease): Promise<typeof HANDED_BACK> {
  await lease.end();
  return HANDED_BACK;
}

/** Records what fn (or reconcile) returned; returns it, or throws what the caller must know. */
async function record<A extends unknown[], R>(
  call: Call<A, R>,
  lease: Lease,
  token: string,
  attempts: number,
  value: Awaited<R>,
  durationMs: () => number,
  event: 'executed' | 'reconciled',
): Promise<Awaited<R>> {
  const { c, key, emit } = call;
  const { resultJson, unstorable } = storableResult(value, c.limits.maxResultBytes, { who: `"${c.name}"`, kind: 'call', key, derived: call.derived });

  // A renewal refused before the settle was reported then ('lease-lost'); one refused
  // during it is not (it may be the settle's own write), and a refusal of the write says it.
  const lostBefore = lease.lost;
  const settled = await settle(
    settling(call),
    lease,
    'complete',
    { key, token, resultJson, error: unstorable, ttlMs: c.ttlMs, durationMs: durationMs() },
    attempts,
  );
  notify(call.store, key);
  const paced = pace();
  if (paced !== undefined) await paced;
  crashPoint('after-complete');
  if (settled.state === 'unknown') {
    const otherwise = `after its lease runs out (leaseMs ${c.leaseMs}), the next call ${
      c.reconcile === undefined ? 'runs fn again' : 'asks reconcile, and runs fn again unless it says the call happened'
    }`;
    throw new StoreError(unknownOutcome(`"${c.name}"`, settled, otherwise), { key, cause: settled.error, outcome: 'unknown' });
  }
  if (settled.state === 'fenced') {
    if (!lostBefore) emit('lease-lost', { attempts });
    throw new LeaseLostError(
      settled.gone
        ? `idempotent-tools: "${c.name}" ran, but meanwhile the record of its ${keyInMessage(call)} went away (cleared, or lost ` +
            'by the store: a Redis restart without persistence, a failover), so this result was not recorded. This run\'s ' +
            'result is in error.result; the next call with this key runs again'
        : `idempotent-tools: "${c.name}" ran, but meanwhile another call took its ${keyInMessage(call)} over ` +
            '(its lease ran out, or a \'retry\' call claimed it), so this result was not recorded: the stored outcome is ' +
            'the other call\'s. The side effect may have happened twice; this run\'s result is in error.result. ' +
            'Call again to get the recorded outcome',
      { key, result: value },
    );
  }
  if (c.ttlMs !== undefined) {
    // The call is complete: its steps expire with it. Its result is recorded whatever
    // happens here; a failure only keeps the step records longer.
    await expireStepsWithCall(call.store, call).catch((error: unknown) => emit('store-error', { attempts, error }));
  }
  emit(event, { attempts });
  if (unstorable !== undefined) throw new UnstorableResultError(unstorable.message, { key });
  return value;
}

/** fn threw: what the record becomes depends on what was thrown (see control-flow.ts). */
async function settleThrown<A extends unknown[], R>(
  call: Call<A, R>,
  lease: Lease,
  token: string,
  attempts: number,
  thrown: unknown,
  durationMs: () => number,
): Promise<void> {
  const { c, key, emit } = call;
  const kind = classifyThrown(thrown);
  if (kind === 'aborted') {
    // The request may have gone out: the outcome is unknown, like a crash. With
    // reconcile, hand the claim back now so the next call asks it; without, leave the
    // claim to run out, so the next call runs again only after the lease.
    if (c.reconcile !== undefined) await lease.end();
    else lease.stop();
    emit('aborted', { attempts, error: thrown });
    return;
  }
  const lostBefore = lease.lost;
  const settled = await settle(
    settling(call),
    lease,
    'fail',
    { key, token, error: errorOf(thrown), ttlMs: c.ttlMs, durationMs: durationMs() },
    attempts,
  );
  notify(call.store, key);
  // The caller gets fn's own error whatever happened to the record: if it stayed pending
  // the next call runs again after the lease, as it would have after `failed`.
  if (settled.state === 'fenced' && !lostBefore) emit('lease-lost', { attempts });
  emit(kind === 'control-flow' ? 'interrupted' : 'failed', { attempts, error: thrown });
}

/**
 * The record was taken over from an owner whose lease ran out: its side effect may have
 * happened. Asks `reconcile`, holding the claim (renewed) meanwhile.
 */
async function askReconcile<A extends unknown[], R>(
  call: Call<A, R>,
  lease: Lease,
  token: string,
  attempts: number,
  durationMs: () => number,
): Promise<{ happened: true; value: unknown } | { happened: false }> {
  const { c, key, args } = call;
  let outcome: ReconcileOutcome;
  try {
    const context = { key, fingerprint: call.fingerprint, name: c.name, store: call.store, leaseMs: c.leaseMs, maxResultBytes: c.limits.maxResultBytes, steps: call.steps, meta: call.meta };
    outcome = await running.run(context, () =>
      c.reconcile!({ key, name: c.name, args, attempts }),
    );
    if (outcome === null || typeof outcome !== 'object' || typeof outcome.happened !== 'boolean') {
      throw new TypeError(
        `idempotent-tools: the "reconcile" option of "${c.name}" must return { happened: true, result } or { happened: false }, ` +
          `not ${outcome === null ? 'null' : typeof outcome === 'object' ? JSON.stringify(Object.keys(outcome)) : typeof outcome}`,
      );
    }
  } catch (err) {
    // Still unknown: hand the claim back, so the next call takes it over and asks again.
    await lease.end();
    throw err;
  }
  if (!outcome.happened) return { happened: false };
  const value = await record(call, lease, token, attempts, outcome.result as Awaited<R>, durationMs, 'reconciled');
  return { happened: true, value };
}
