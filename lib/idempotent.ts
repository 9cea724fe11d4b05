/**
 * The call protocol: what one wrapped call does with its key's record (the table in
 * the README). Store-agnostic: everything atomic happens inside `store.acquire`.
 */

import { withArgsPreview } from './args-preview.js';
import { running } from './call-context.js';
import { Unencodable, canonicalJson } from './canonical.js';
import {
  DuplicateInFlightError,
  InFlightTimeoutError,
  KeyMismatchError,
  StoreError,
  asStoreError,
} from './errors.js';
import { crashPoint } from './fault.js';
import { pace } from './pacing.js';
import { type IdempotencyEvent, type IdempotencyEventType, listening, publish } from './events.js';
import { keepLease } from './lease.js';
import * as native from './native.js';
import { type Config, type IdempotentOptions, resolveOptions } from './options.js';
import { defaultStore } from './sqlite-store.js';
import type { AcquireResult, IdempotencyRecord, RecordError, Store } from './store.js';
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
  emit: Emit;
}

interface Identity {
  key: string;
  fingerprint: string;
}

/** Wraps `fn` so that a repeated call returns the first call's stored result. */
export function idempotent<A extends unknown[], R>(
  fn: Fn<A, R>,
  options?: IdempotentOptions<A>,
): IdempotentFunction<A, R> {
  const config = resolveOptions<A>(fn, options);
  let store = config.store;
  const resolveStore = () => (store ??= defaultStore());

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
}

function encodeOrThrow(value: unknown, root: string, name: string): string {
  try {
    return canonicalJson(value);
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
  const payload = c.payload !== undefined ? c.payload(...args) : trimmed(args);
  const root = c.payload !== undefined ? 'payload' : 'args';
  if (key !== undefined) {
    // An explicit key is often given because the arguments are not data; then the
    // fingerprint covers the name only.
    let payloadJson: string | null = null;
    try {
      payloadJson = canonicalJson(payload);
    } catch (err) {
      if (!(err instanceof Unencodable)) throw err;
    }
    return { key, fingerprint: native.fingerprint(c.name, payloadJson) };
  }
  if (payload === undefined) {
    throw new TypeError(`idempotent-tools: the "payload" option of "${c.name}" returned undefined; return the data that identifies the call`);
  }
  const payloadJson = encodeOrThrow(payload, root, c.name);
  let contextJson: string | null = null;
  if (c.context !== undefined) {
    const context = c.context(...args);
    if (context === undefined) {
      // Most likely a missing thread or run id: without a scope, calls of different
      // threads would share keys.
      throw new TypeError(`idempotent-tools: the "context" option of "${c.name}" returned undefined; return the scope of the call (a thread or run id)`);
    }
    contextJson = encodeOrThrow(context, 'context', c.name);
  }
  const both = native.callHashes(c.name, contextJson, payloadJson);
  return { key: both.slice(64), fingerprint: both.slice(0, 64) };
}

async function runCall<A extends unknown[], R>(
  c: Config<A>,
  resolveStore: () => Store,
  fn: Fn<A, R>,
  explicitKey: string | undefined,
  args: A,
): Promise<Awaited<R>> {
  const startedAt = listening(c.onEvent) ? performance.now() : 0;
  const { key, fingerprint } = identify(c, explicitKey, args);
  const emit: Emit = (type, extra) => {
    if (listening(c.onEvent)) {
      publish(c.onEvent, { type, key, name: c.name, durationMs: performance.now() - startedAt, ...extra });
    }
  };
  const call: Call<A, R> = { c, store: resolveStore(), fn, args, key, fingerprint, emit };
  const store = call.store;

  // The replay fast path: a store that can read a completed record without waiting
  // (SQLite in WAL mode) answers here, with no trip through the async machinery. Any
  // other case (a miss, pending, another fingerprint) is decided by acquire below.
  const hit = store.peekReplay?.(key, fingerprint);
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
  let waited = false;
  for (;;) {
    let claim: AcquireResult;
    try {
      claim = await store.acquire({
        key,
        name: c.name,
        fingerprint,
        leaseMs: c.leaseMs,
        ttlMs: c.ttlMs,
        force: c.onDuplicate === 'retry',
        meta: withArgsPreview(undefined, c.preview, call.args),
      });
    } catch (err) {
      emit('store-error', { error: err });
      throw asStoreError(err, key);
    }
    await pace(); // a burst of replies resumes over several turns of the loop
    if (claim.acquired) {
      if (claim.takenOver) emit('taken-over', { attempts: claim.attempts });
      return execute(call, claim.token, claim.attempts);
    }
    const record = claim.record;
    if (record.status === 'completed' || record.fingerprint !== fingerprint) {
      return replay(call, record);
    }
    if (!waited) emit('in-flight', { attempts: record.attempts });
    if (watch === undefined) {
      throw new DuplicateInFlightError(
        `idempotent-tools: a call of "${c.name}" with key ${key} is already in flight; ` +
          'retry later, or wrap with onDuplicate: "block" to wait for its result',
        { key },
      );
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new InFlightTimeoutError(
        `idempotent-tools: waited ${c.pollTimeoutMs} ms for the in-flight call of "${c.name}" with key ${key} to finish; ` +
          'it is still running (raise pollTimeoutMs to wait longer)',
        { key },
      );
    }
    waited = true;
    await watch.wait(Math.min(c.pollIntervalMs, left));
  }
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
        `(npx idempotent-tools clear --key ${record.key}) if it is truly stale`,
      { key: record.key },
    );
  }
  return replayed(call, record);
}

/** Returns a completed record's stored result (or throws its unstorable-result error). */
function replayed<A extends unknown[], R>(call: Call<A, R>, outcome: Pick<IdempotencyRecord, 'result' | 'error' | 'attempts'>): Awaited<R> {
  call.emit('replayed', { attempts: outcome.attempts });
  if (outcome.error !== null) throw new TypeError(outcome.error.message);
  return outcome.result as Awaited<R>;
}

function errorOf(thrown: unknown): RecordError {
  if (thrown instanceof Error) return { name: thrown.name, message: thrown.message };
  let message: string;
  try {
    message = String(thrown);
  } catch {
    message = 'a value that cannot be turned into a string';
  }
  return { name: 'NonErrorThrown', message };
}

async function execute<A extends unknown[], R>(call: Call<A, R>, token: string, attempts: number): Promise<Awaited<R>> {
  const { c, store, fn, args, key, emit } = call;
  crashPoint('after-acquire');
  const lease = keepLease(store, key, token, c.leaseMs);
  let value: Awaited<R>;
  try {
    value = await running.run({ key, name: c.name, store, leaseMs: c.leaseMs, ttlMs: c.ttlMs }, () => fn(...args));
  } catch (thrown) {
    lease.stop();
    try {
      await store.fail({ key, token, error: errorOf(thrown), ttlMs: c.ttlMs });
    } catch (err) {
      // The caller gets fn's own error; the record stays pending until its lease runs
      // out, then the next call runs again (which is what `failed` would have done).
      emit('store-error', { error: err });
    } finally {
      notify(store, key);
    }
    emit('failed', { attempts, error: thrown });
    throw thrown;
  }
  lease.stop();
  crashPoint('after-fn');

  let resultJson: string | undefined;
  let unstorable: RecordError | undefined;
  if (value !== undefined) {
    try {
      resultJson = canonicalJson(value);
    } catch (err) {
      if (!(err instanceof Unencodable)) throw err;
      unstorable = {
        name: 'TypeError',
        message:
          `idempotent-tools: "${c.name}" ran, but its result cannot be stored: ${err.pathFrom('result')} is ${err.what}. ` +
          'The call is recorded as completed and will not run again; return JSON data from the function ' +
          '(and clear this key to run it again)',
      };
    }
  }

  let recorded: boolean;
  try {
    recorded = await store.complete({ key, token, resultJson, error: unstorable, ttlMs: c.ttlMs });
  } catch (err) {
    emit('store-error', { error: err });
    throw new StoreError(
      `idempotent-tools: "${c.name}" ran, but its result could not be recorded (${asStoreError(err).message}). ` +
        'The record stays pending: after its lease runs out, the next call with this key runs again',
      { key, cause: err },
    );
  } finally {
    notify(store, key);
  }
  await pace();
  crashPoint('after-complete');
  emit(recorded ? 'executed' : 'lease-lost', { attempts });
  if (unstorable !== undefined) throw new TypeError(unstorable.message);
  return value;
}
