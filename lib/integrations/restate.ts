/**
 * `idempotent-tools/restate`: `ctx.run` whose side effect runs once per run, whatever Restate
 * retries.
 *
 *     const receipt = await idempotentRun(ctx, 'charge', () => chargeCard(order));
 *
 * Restate journals a `ctx.run` result and replays it; until the journal has it (the service
 * died, or lost its connection, after the side effect and before the entry was acknowledged),
 * the closure runs again on the retry. The key is the invocation id (`ctx.request().id`) and
 * the run's name, with how many runs of that name the handler made before (a loop of
 * `ctx.run('charge')` is one call per iteration; a retry replays the handler in the same
 * order). The closure gets no context from Restate, so the helper takes `ctx` and calls
 * `ctx.run` itself; `currentKey()` inside the closure is the key. Nothing of Restate is
 * imported.
 */

import { type EngineStepOptions, type EngineStepSite, checkStepOptions, idOf, nextOccurrence, wrapEngineStep } from './engine-step.js';
import { CannotTellError } from './identity.js';

export type { EngineStepOptions, StepReconcileAnswer, StepReconcileRequest } from './engine-step.js';
export { currentKey } from '../core/call-context.js';

const WHERE = 'idempotent-tools/restate';

/** What this helper uses of a Restate context (any handler's `ctx`). */
export interface RestateRunContext {
  request(): { id: unknown; attemptCompletedSignal?: unknown };
  run<T>(name: string, action: () => Promise<T>, options?: never): PromiseLike<T>;
}

/** `idempotentRun`'s options: the package's, and `runOptions` for `ctx.run` itself (its retry policy, its serde). */
export interface RestateRunOptions<R> extends Omit<EngineStepOptions<[], R>, 'name' | 'key' | 'payload'> {
  /** A business key: the run is then that key, whatever the invocation. */
  key?: string;
  /** Passed to `ctx.run` as its options. */
  runOptions?: object;
}

type Site = EngineStepSite | CannotTellError;
type Wrapped = (site: Site, action: () => unknown) => Promise<unknown>;

/** One wrapper per run name and options object (most code passes none). */
const wrappers = new Map<string, WeakMap<object, Wrapped>>();
const NO_OPTIONS = {};

function wrapperFor(name: string, options: RestateRunOptions<unknown> | undefined): Wrapped {
  const holder = options ?? NO_OPTIONS;
  let byOptions = wrappers.get(name);
  if (byOptions === undefined) wrappers.set(name, (byOptions = new WeakMap()));
  let wrapped = byOptions.get(holder);
  if (wrapped !== undefined) return wrapped;
  const { runOptions, key, ...rest } = (options ?? {}) as RestateRunOptions<unknown>;
  checkStepOptions(WHERE, rest);
  if (key !== undefined && (typeof key !== 'string' || key.length === 0)) throw new TypeError(`${WHERE}: option "key" must be a non-empty string`);
  if (runOptions !== undefined && (runOptions === null || typeof runOptions !== 'object')) throw new TypeError(`${WHERE}: option "runOptions" must be an object`);
  // The side effect the core runs: the closure this run was given, passed as an argument (the
  // key and fingerprint cover the run's name only, never the closure).
  const sideEffect = Object.defineProperty((_site: Site, action: () => unknown) => action(), 'name', { value: name });
  wrapped = wrapEngineStep<[Site, () => unknown], unknown>(
    WHERE,
    sideEffect,
    { ...(rest as EngineStepOptions<[Site, () => unknown], unknown>), name, payload: () => null, ...(key === undefined ? {} : { key: () => key }) },
    ([site]) => site,
  );
  byOptions.set(holder, wrapped);
  return wrapped;
}

/** The run as Restate names it: the invocation and the run's name, counted within the attempt the handler runs in. */
function restateSite(ctx: RestateRunContext, name: string): Site {
  let request: { id: unknown; attemptCompletedSignal?: unknown } | undefined;
  try {
    request = ctx.request();
  } catch {
    request = undefined;
  }
  const id = idOf(request?.id);
  if (request === undefined || id === undefined) {
    return new CannotTellError('key', `${WHERE}: run "${name}": the ctx passed has no invocation id (ctx.request().id), so nothing names this run. Pass the handler's ctx, or a business key: { key: \`charge-\${order.id}\` }.`);
  }
  const site: EngineStepSite = { engine: 'restate', ids: [['invocationId', id], ['run', name]], attempt: ctx, signal: request.attemptCompletedSignal };
  // Counted now, in the handler's order (which a retry replays), not when Restate runs the closure.
  site.occurrence = nextOccurrence(site, name);
  return site;
}

/**
 * `ctx.run(name, action)`, with `action`'s side effect recorded: a retry of the invocation
 * whose journal lacks this run's result (the service died after the side effect) gets the
 * first attempt's stored result instead of running it again.
 */
export function idempotentRun<T>(ctx: RestateRunContext, name: string, action: () => T | Promise<T>, options?: RestateRunOptions<T>): PromiseLike<Awaited<T>> {
  if (ctx === null || typeof ctx !== 'object' || typeof ctx.run !== 'function' || typeof ctx.request !== 'function') {
    throw new TypeError(`${WHERE}: idempotentRun(ctx, name, action): ctx must be the handler's Restate context`);
  }
  if (typeof name !== 'string' || name.length === 0) throw new TypeError(`${WHERE}: idempotentRun(ctx, name, action): name must be a non-empty string (the run's name, part of its key)`);
  if (typeof action !== 'function') throw new TypeError(`${WHERE}: idempotentRun(ctx, name, action): action must be a function`);
  const wrapped = wrapperFor(name, options as RestateRunOptions<unknown> | undefined);
  const site = restateSite(ctx, name);
  return ctx.run(name, () => wrapped(site, action) as Promise<T>, options?.runOptions as never) as PromiseLike<Awaited<T>>;
}
