/**
 * What the durable execution engines' helpers share (`temporal.ts`, `inngest.ts`,
 * `restate.ts`, `dbos.ts`, `workflow.ts`, `trigger.ts`): a side effect called inside an
 * engine's step, keyed by the step's stable identity as the engine names it (plus how many
 * times this step's attempt has called the function before: a loop that calls it twice in
 * one step is two calls), with the claim's lease following the engine's timer for an
 * attempt where the step can read one.
 *
 * Why it is needed where an engine journals a step's result: every engine runs a step at
 * least once. A step whose side effect happened and whose worker then died (or timed out)
 * before the engine recorded the step's result runs again. The record written here, when the
 * side effect returns, closes that window: the engine's retry finds it and replays it. What
 * it does not close is the package's own window (the side effect done, its record not yet
 * written): there the retry takes the claim over once the dead owner's lease runs out and
 * asks `reconcile`, and `currentKey()`, passed downstream, lets the provider refuse the second
 * request.
 *
 * No engine is imported: each helper reads the context the engine keeps for the running step
 * (most keep it on `globalThis` under a symbol, so that bundled copies share it), or what the
 * user passes (Restate's `ctx`).
 */

import { createHash } from 'node:crypto';

import '../stores/default-store.js';
import { canonicalJson } from '../core/canonical.js';
import { type IdempotentFunction, idempotent } from '../core/idempotent.js';
import { KeyMismatchError } from '../core/errors.js';
import { WRAPS } from '../core/names.js';
import { type IdempotentOptions, WAIT_SIGNAL } from '../core/options.js';
import type { RecordMeta } from '../core/store.js';
import { CannotTellError } from './identity.js';

/** Where a call of a wrapped side effect runs: the engine's step, as the engine names it. */
export interface EngineStepSite {
  /** The engine, in keys and records: 'temporal', 'inngest', 'restate', 'dbos', 'workflow', 'trigger'. */
  engine: string;
  /**
   * The step's identity, outermost first, each part as the engine names it (a run id, then
   * the step's id): stable across the engine's retries of the step, different for another
   * step, another iteration of a loop of steps, and another run.
   */
  ids: ReadonlyArray<readonly [string, string]>;
  /**
   * An object that lives for one attempt of the step (a retry has another): the calls of a
   * wrapped function are counted on it, so the second call within one step is another call,
   * and a retry counts from the start again.
   */
  attempt: object;
  /** Which call of the function this is within the step, when the helper counted it itself (Restate counts when `ctx.run` is called, not when its closure runs). */
  occurrence?: number;
  /** What distinguishes steps that share `attempt` (Inngest runs several steps in one request). */
  within?: string;
  /** The engine's timer for one attempt of the step, in ms (Temporal's heartbeat or start-to-close timeout): the lease follows it. */
  timerMs?: number;
  /** Fires when the engine gives this attempt up: a wait for another attempt of the same call ends then. */
  signal?: unknown;
}

/** What `reconcile` is asked: the side effect's own arguments, and the step it ran in. */
export interface StepReconcileRequest<A extends unknown[]> {
  /** The call's key: what `currentKey()` gave the attempt that died. */
  key: string;
  name: string;
  args: A;
  /** The record's attempt count, this one included. */
  attempts: number;
}

export type StepReconcileAnswer<R> = { happened: true; result: Awaited<R> } | { happened: false };

/** The options of every engine helper: `idempotent()`'s, less those the helper sets. */
export interface EngineStepOptions<A extends unknown[], R>
  extends Omit<IdempotentOptions<A>, 'key' | 'context' | 'onDuplicate' | 'reconcile' | 'meta' | 'preview'> {
  /**
   * A business key: `(...args) => string`. The call is then that key, whatever the step, the
   * run or the engine: two runs that charge one order are one charge. Without it, the key is
   * the step's identity.
   */
  key?: (...args: A) => string;
  /**
   * While another attempt of the same call still runs (the engine gave it up as slow, and it
   * goes on): `'block'` (the default) waits for its result, as long as its owner holds the
   * lease, and takes the call over when the owner died; `'retry'` runs again at once.
   */
  onDuplicate?: 'block' | 'retry';
  /**
   * Asked before the side effect runs again on a call whose owner died (its lease ran out):
   * did it happen? Look it up downstream by `key`, which `currentKey()` gave that attempt.
   */
  reconcile?: (request: StepReconcileRequest<A>) => StepReconcileAnswer<R> | Promise<StepReconcileAnswer<R>>;
}

/** The lease when neither `leaseMs` nor the engine says (the package's default). */
const DEFAULT_LEASE_MS = 30_000;

/** One call as the core sees it: the arguments, and where it runs. */
interface StepCall<A extends unknown[]> {
  args: A;
  self: unknown;
  site: EngineStepSite | undefined;
  meta: RecordMeta | undefined;
}

/** How many calls of each wrapped function each attempt of a step has made so far. */
const occurrences = new WeakMap<object, Map<string, number>>();

/** The next occurrence of `name` within the step's attempt: 0, then 1, ... (counted when the call is made, so in program order). */
export function nextOccurrence(site: EngineStepSite, name: string): number {
  let counts = occurrences.get(site.attempt);
  if (counts === undefined) {
    counts = new Map();
    occurrences.set(site.attempt, counts);
  }
  const slot = `${site.within ?? ''}\u0000${name}`;
  const n = counts.get(slot) ?? 0;
  counts.set(slot, n + 1);
  return n;
}

/**
 * The key of the `n`th call of `name` in a step: the engine's name, then a digest of the
 * step's identity, the function's name and `n`. A digest, so that it fits what providers
 * take as an idempotency key (Stripe: 255 characters; Adyen: 64; only letters, digits and
 * `-`), whatever the engine's ids hold; the ids themselves are in the record (`inspect
 * --scope <run id>` finds them).
 */
export function engineStepKey(site: EngineStepSite, name: string, n: number): string {
  const digest = createHash('sha256')
    .update(canonicalJson({ engine: site.engine, ids: site.ids.map(([k, v]) => [k, v]), name, n }))
    .digest('hex')
    .slice(0, 40);
  return `${site.engine}-${digest}`;
}

/** The record's metadata: the run as its scope (`inspect --scope`), the step and occurrence as the call. */
function metaOf(site: EngineStepSite, n: number | undefined): RecordMeta {
  const parts = site.ids.map(([, v]) => v);
  const step = parts.length > 1 ? parts.pop()! : parts[0]!;
  return { framework: site.engine, scope: parts.join('/') || step, toolCallId: n === undefined ? step : `${step}#${n}` };
}

const KNOWN = new Set([
  'store', 'name', 'ttlMs', 'onDuplicate', 'pollIntervalMs', 'pollTimeoutMs', 'leaseMs', 'key', 'payload', 'onEvent', 'reconcile',
  'maxKeyBytes', 'maxArgsBytes', 'maxResultBytes',
]);

/** Checks a helper's options at wrap time (a typo fails at startup, naming the helper). */
export function checkStepOptions(where: string, options: unknown): Record<string, unknown> {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') throw new TypeError(`${where}: options must be an object`);
  const o = options as Record<string, unknown>;
  for (const option of Object.keys(o)) {
    if (option === 'context') {
      throw new TypeError(`${where}: option "context" is not taken here: the key is the engine's identity of the step. Pass "key" for a business key, or "payload" to choose which arguments identify the call.`);
    }
    if (!KNOWN.has(option)) throw new TypeError(`${where}: option "${option}" is not an option; the options are ${[...KNOWN].join(', ')}`);
  }
  for (const option of ['key', 'payload', 'onEvent', 'reconcile']) {
    const value = o[option];
    if (value !== undefined && typeof value !== 'function') throw new TypeError(`${where}: option "${option}" must be a function, not ${value === null ? 'null' : typeof value}`);
  }
  if (o.onDuplicate === 'raise') {
    throw new TypeError(
      `${where}: onDuplicate "raise" is refused here: an engine retry of a step whose first attempt still runs would fail, and the engine would retry again. ` +
        'Leave the default ("block": wait for the first attempt\'s result, and take the call over if its owner died).',
    );
  }
  return o;
}

/**
 * Wraps `fn`, a side effect called inside an engine's step. `locate` reads the engine's
 * context for the running step: the site, or a `CannotTellError` (naming `key`) when the
 * call runs outside any step the engine can name (then only a business key tells the call).
 * @internal
 */
export function wrapEngineStep<A extends unknown[], R>(
  where: string,
  fn: (...args: A) => R,
  options: EngineStepOptions<A, R> | undefined,
  locate: (args: A) => EngineStepSite | CannotTellError,
): (...args: A) => Promise<Awaited<R>> {
  if (typeof fn !== 'function') throw new TypeError(`${where}: the side effect must be a function, not ${fn === null ? 'null' : typeof fn}`);
  const o = checkStepOptions(where, options) as EngineStepOptions<A, R>;
  const { key: businessKey, payload, reconcile, leaseMs, pollTimeoutMs, ...rest } = o;
  const name = typeof o.name === 'string' && o.name.length > 0 ? o.name : fn.name;
  if (name === '') {
    throw new TypeError(
      `${where}: the side effect is anonymous; name it (async function chargeCard(order) { ... }) or pass the "name" option. ` +
        'The name is part of every key: two side effects of one step must not share one.',
    );
  }

  // The one function the core runs for this wrapper (named after the user's, so that two
  // wrappers of one function under one name are one, and of two functions are refused).
  const runStep = function (this: unknown, call: StepCall<A>): R {
    return fn.apply(call.self, call.args);
  };
  const cores = new Map<string, IdempotentFunction<[StepCall<A>], R>>();
  const coreFor = (lease: number): IdempotentFunction<[StepCall<A>], R> => {
    // A wait lasts at least as long as a dead owner's lease can: the retry that waits then takes the call over.
    const wait = pollTimeoutMs ?? Math.max(lease + lease / 2, 30_000);
    const id = `${lease}\u0000${wait}`;
    let core = cores.get(id);
    if (core === undefined) {
      const coreOptions: IdempotentOptions<[StepCall<A>]> & Record<symbol, unknown> = {
        ...(rest as IdempotentOptions<[StepCall<A>]>),
        name,
        leaseMs: lease,
        pollTimeoutMs: wait,
        onDuplicate: o.onDuplicate ?? 'block',
        payload: (call) => (payload !== undefined ? payload(...call.args) : trimmed(call.args)),
        meta: (call) => call.meta,
        [WAIT_SIGNAL]: (call: StepCall<A>) => call.site?.signal,
        [WRAPS]: fn,
      };
      if (reconcile !== undefined) {
        coreOptions.reconcile = (request) => reconcile({ key: request.key, name: request.name, args: request.args[0].args, attempts: request.attempts });
      }
      core = idempotent<[StepCall<A>], R>(runStep, coreOptions);
      cores.set(id, core);
    }
    return core;
  };
  // Options are checked at wrap time.
  coreFor(leaseMs ?? DEFAULT_LEASE_MS);

  const wrapped = async function (this: unknown, ...args: A): Promise<Awaited<R>> {
    let located: EngineStepSite | CannotTellError;
    try {
      located = locate(args);
    } catch (err) {
      // The engine could not be read (not installed, say): a business key still names the call.
      if (businessKey === undefined) throw err;
      located = new CannotTellError('key', String(err));
    }
    const site = located instanceof CannotTellError ? undefined : located;
    let key: string;
    let meta: RecordMeta | undefined;
    if (businessKey !== undefined) {
      key = businessKey(...args);
      if (typeof key !== 'string' || key.length === 0) throw new TypeError(`${where}: the "key" option of "${name}" must return a non-empty string, not ${key === '' ? 'an empty string' : typeof key}`);
      meta = site === undefined ? undefined : metaOf(site, undefined);
    } else {
      if (located instanceof CannotTellError) throw located;
      const n = located.occurrence ?? nextOccurrence(located, name);
      key = engineStepKey(located, name, n);
      meta = metaOf(located, n);
    }
    const lease = leaseMs ?? (site?.timerMs !== undefined && site.timerMs > 0 ? site.timerMs : DEFAULT_LEASE_MS);
    const call = coreFor(lease).withKey(key);
    let leaseLost = false;
    for (;;) {
      try {
        return await call({ args, self: this, site, meta });
      } catch (err) {
        const code = (err as { code?: unknown } | null)?.code;
        if ((err as { key?: unknown } | null)?.key !== key) throw err;
        // Past pollTimeoutMs the other attempt is still going (its owner renews its lease):
        // a slow step is not a failed one, so keep waiting, until the engine gives this attempt up.
        if (code === 'IN_FLIGHT_TIMEOUT' && !aborted(site?.signal)) continue;
        // This attempt's claim was taken over while it ran (its process paused past the lease):
        // the record holds the other attempt's outcome; read it (once) rather than fail the step.
        if (code === 'LEASE_LOST' && !leaseLost && o.onDuplicate !== 'retry') {
          leaseLost = true;
          continue;
        }
        if (code === 'KEY_MISMATCH' && businessKey === undefined) {
          throw new KeyMismatchError(
            `${where}: "${name}" was called in this step with other arguments than in an earlier attempt of the same step (the same call: the step's ` +
              'identity, and how many times the step had called it before). A retry must make the same calls; to say which arguments identify a call, ' +
              'pass "payload" (leave out what changes between attempts: a timestamp, a random id), or "key" for a business key.',
            { key },
          );
        }
        throw err;
      }
    }
  };
  Object.defineProperty(wrapped, 'name', { value: name });
  return wrapped;
}

/** `f(a)` and `f(a, undefined)` are one call (as the core has it). */
function aborted(signal: unknown): boolean {
  return signal !== null && typeof signal === 'object' && (signal as { aborted?: unknown }).aborted === true;
}

function trimmed(args: unknown[]): unknown[] {
  let n = args.length;
  while (n > 0 && args[n - 1] === undefined) n--;
  return n === args.length ? args : args.slice(0, n);
}

/** The store an engine keeps its step context in, on `globalThis` under `Symbol.for(name)`; undefined when that engine is not loaded. */
export function globalStorage(name: string): { getStore(): unknown } | undefined {
  const value = (globalThis as Record<symbol, unknown>)[Symbol.for(name)];
  return value !== null && typeof value === 'object' && typeof (value as { getStore?: unknown }).getStore === 'function'
    ? (value as { getStore(): unknown })
    : undefined;
}

/** A non-empty string, or undefined. */
export function idOf(value: unknown): string | undefined {
  if (typeof value === 'string' && value.length > 0) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}
