/** The options of `idempotent()`, checked once at wrap time so that a typo fails at startup. */

import { type ArgsPreviewOption, resolvePreview } from './args-preview.js';
import type { EventSink, IdempotencyEvent } from './events.js';
import { type Limits, resolveLimits } from './limits.js';
import { checkCallName } from './reserved.js';
import type { RecordMeta, Store } from './store.js';

export type OnDuplicate = 'raise' | 'block' | 'retry';

/**
 * @internal What a helper passes to end a `'block'` wait with the request it serves:
 * `[WAIT_SIGNAL]: (...args) => signal`, a function of the call's arguments that returns that
 * request's AbortSignal (a cancel, or its client leaving), or undefined. When the signal
 * fires, the wait ends at once (its timer and subscriptions released) with a
 * `WaitAbandonedError`; it never stops a call that runs. Not a documented option: the
 * helpers are what hold a request's signal (the framework's, the MCP request's), and a
 * documented `signal` would read as one that aborts `fn`. A symbol, so that `Object.keys`
 * (the check of option names) never sees it.
 */
export const WAIT_SIGNAL: unique symbol = Symbol.for('idempotent-tools.waitSignal') as never;

/** @internal `idempotent()`'s options with the helpers' `WAIT_SIGNAL`. */
export type WaitingOptions<A extends unknown[]> = IdempotentOptions<A> & { [WAIT_SIGNAL]?: (...args: A) => unknown };

/** The part of an AbortSignal a wait reads (a signal of another realm or a polyfill has it too). */
export interface WaitSignal {
  readonly aborted: boolean;
  readonly reason?: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** `value` if it can end a wait (an AbortSignal, or one shaped like it), else undefined. */
export function asWaitSignal(value: unknown): WaitSignal | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const s = value as Partial<WaitSignal>;
  return typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function' && typeof s.removeEventListener === 'function' ? (s as WaitSignal) : undefined;
}

export interface IdempotentOptions<A extends unknown[] = unknown[]> {
  /** Where records live. Default: `defaultStore()` (opened on the first call). */
  store?: Store;
  /** The function's name in keys and records. Default: `fn.name`. */
  name?: string;
  /** A record older than this counts as never seen, whatever its status. Default: never expires. */
  ttlMs?: number;
  /** What a call does when its key is in flight. Default `'raise'`. */
  onDuplicate?: OnDuplicate;
  /** How often `'block'` looks again (a waiter in the owner's process is woken at once). Default 200. */
  pollIntervalMs?: number;
  /** How long `'block'` waits before `InFlightTimeoutError`. Default 30000. */
  pollTimeoutMs?: number;
  /** How long a claim lives without renewal; renewed every third of it while `fn` runs. Default 30000. */
  leaseMs?: number;
  /** An explicit key from the arguments. */
  key?: (...args: A) => string;
  /** A scope (thread, run, tool call) mixed into the derived key. */
  context?: (...args: A) => unknown;
  /** The part of the arguments that identifies the call (default: all of them). */
  payload?: (...args: A) => unknown;
  /** Called with every call's outcome (see README, "Events"). */
  onEvent?: (event: IdempotencyEvent) => void;
  /**
   * Asked before `fn` runs again on a record taken over after its owner's lease ran out
   * (the owner may have had its side effect and died before recording it). Return
   * `{ happened: true, result }` to record that result as completed (fn does not run),
   * or `{ happened: false }` to run fn. Throwing: the call throws that, fn does not
   * run, and the next call asks again.
   */
  reconcile?: (attempt: ReconcileAttempt<A>) => ReconcileOutcome | Promise<ReconcileOutcome>;
  /** Where the call comes from (scope, tool call id, framework), kept with its record for `inspect`. */
  meta?: (...args: A) => RecordMeta | undefined;
  /** Keep a redacted, capped preview of the arguments in the record (README, "Inspecting"). Default off. */
  preview?: ArgsPreviewOption<A>;
  /** The longest explicit key, in UTF-8 bytes; longer is a TypeError before anything runs. Default 2048. */
  maxKeyBytes?: number;
  /** The largest argument list (or `payload`, or `context`) as JSON, in UTF-8 bytes; larger is a TypeError before anything runs. Default 4 MiB. */
  maxArgsBytes?: number;
  /** The largest result as JSON, in UTF-8 bytes; a larger one is recorded as completed without it, and the call throws a TypeError. Default 16 MiB. */
  maxResultBytes?: number;
}

/** What `reconcile` is asked about. */
export interface ReconcileAttempt<A extends unknown[] = unknown[]> {
  /** The call's key (as `currentKey()` gives it inside fn, so a downstream lookup by it works). */
  key: string;
  name: string;
  args: A;
  /** The record's attempt count, this attempt included. */
  attempts: number;
}

export type ReconcileOutcome = { happened: true; result: unknown } | { happened: false };

export interface Config<A extends unknown[]> {
  name: string;
  store: Store | undefined;
  ttlMs: number | undefined;
  onDuplicate: OnDuplicate;
  pollIntervalMs: number;
  pollTimeoutMs: number;
  leaseMs: number;
  key: ((...args: A) => string) | undefined;
  context: ((...args: A) => unknown) | undefined;
  payload: ((...args: A) => unknown) | undefined;
  onEvent: EventSink;
  reconcile: ((attempt: ReconcileAttempt<A>) => ReconcileOutcome | Promise<ReconcileOutcome>) | undefined;
  meta: ((...args: A) => RecordMeta | undefined) | undefined;
  preview: ArgsPreviewOption<A>;
  limits: Limits;
  /** The `WAIT_SIGNAL` option: the signal that ends a `'block'` wait of this call. */
  waitSignal: ((...args: A) => unknown) | undefined;
}

const NAMES = [
  'store', 'name', 'ttlMs', 'onDuplicate', 'pollIntervalMs', 'pollTimeoutMs',
  'leaseMs', 'key', 'context', 'payload', 'onEvent', 'reconcile', 'meta', 'preview',
  'maxKeyBytes', 'maxArgsBytes', 'maxResultBytes',
] as const;
const KNOWN = new Set<string>(NAMES);
const ON_DUPLICATE = new Set(['raise', 'block', 'retry']);

function fail(option: string, what: string, Kind: typeof TypeError | typeof RangeError = TypeError): never {
  throw new Kind(`idempotent(): option "${option}" ${what}`);
}

function time(options: Record<string, unknown>, option: string, fallback: number | undefined, allowZero: boolean) {
  const value = options[option];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number') fail(option, `must be a number of milliseconds, not ${typeof value}`);
  if (!Number.isFinite(value)) fail(option, `must be finite, not ${value}`, RangeError);
  if (value < 0 || (!allowZero && value === 0)) {
    fail(option, `must be ${allowZero ? '>= 0' : '> 0'} milliseconds, not ${value}`, RangeError);
  }
  return value;
}

function optionalFunction<F>(options: Record<string, unknown>, option: string): F | undefined {
  const value = options[option];
  if (value === undefined) return undefined;
  if (typeof value !== 'function') fail(option, `must be a function, not ${value === null ? 'null' : typeof value}`);
  return value as F;
}

function waitSignalOption<A extends unknown[]>(options: object): ((...args: A) => unknown) | undefined {
  const value = (options as { [WAIT_SIGNAL]?: unknown })[WAIT_SIGNAL];
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw new TypeError('idempotent(): the wait-signal option must be a function of the call\'s arguments');
  return value as (...args: A) => unknown;
}

export function resolveOptions<A extends unknown[]>(fn: unknown, options: IdempotentOptions<A> | undefined): Config<A> {
  if (typeof fn !== 'function') {
    throw new TypeError(`idempotent(fn): fn must be a function, not ${fn === null ? 'null' : typeof fn}`);
  }
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object') {
    throw new TypeError('idempotent(fn, options): options must be an object');
  }
  const o = options as Record<string, unknown>;
  for (const option of Object.keys(o)) {
    if (!KNOWN.has(option)) fail(option, `is not an option; the options are ${NAMES.join(', ')}`);
  }

  const name = o.name ?? fn.name;
  if (o.name !== undefined && (typeof o.name !== 'string' || o.name.length === 0)) {
    fail('name', 'must be a non-empty string');
  }
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError(
      'idempotent(fn): fn is anonymous; give it a name (function chargeCard() {}) or pass the "name" option. ' +
        'The name is part of every key: two functions must not share one.',
    );
  }
  checkCallName(name);

  const store = o.store as Store | undefined;
  if (store !== undefined) {
    const missing = ['acquire', 'complete', 'fail'].filter(
      (m) => store === null || typeof (store as unknown as Record<string, unknown>)[m] !== 'function',
    );
    if (store === null || typeof store !== 'object' || missing.length > 0) {
      fail('store', `must implement the store interface (missing: ${missing.join(', ') || 'an object'})`);
    }
  }

  const onDuplicate = o.onDuplicate ?? 'raise';
  if (typeof onDuplicate !== 'string' || !ON_DUPLICATE.has(onDuplicate)) {
    fail('onDuplicate', `must be 'raise', 'block' or 'retry', not ${JSON.stringify(onDuplicate)}`);
  }

  return {
    name,
    store,
    ttlMs: time(o, 'ttlMs', undefined, false),
    onDuplicate: onDuplicate as OnDuplicate,
    pollIntervalMs: time(o, 'pollIntervalMs', 200, false)!,
    pollTimeoutMs: time(o, 'pollTimeoutMs', 30_000, true)!,
    leaseMs: time(o, 'leaseMs', 30_000, false)!,
    key: optionalFunction(o, 'key'),
    context: optionalFunction(o, 'context'),
    payload: optionalFunction(o, 'payload'),
    onEvent: optionalFunction(o, 'onEvent'),
    reconcile: optionalFunction(o, 'reconcile'),
    meta: optionalFunction(o, 'meta'),
    preview: resolvePreview<A>(o.preview),
    limits: resolveLimits(o, fail),
    waitSignal: waitSignalOption<A>(options),
  };
}
