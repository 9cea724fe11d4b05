/**
 * `idempotent-tools/trigger`: a side effect inside a Trigger.dev task's `run()`, run once per
 * run whatever Trigger.dev retries.
 *
 *     const chargeCard = idempotentStep(async function chargeCard(order) { ... });
 *     export const pay = task({ id: 'pay', run: async (payload) => chargeCard(payload.order) });
 *
 * Trigger.dev has no steps: a failed attempt runs `run()` again from its first line. The key is
 * the run's id (`ctx.run.id`, stable across its attempts; Trigger.dev's own idempotency keys
 * dedupe triggers, not the code inside a run), the function's name, and how many times this
 * attempt called it before: the second charge of a loop is another call, and a retry's first
 * charge is the first attempt's. Nothing of Trigger.dev is imported: the run is read from the
 * task context the SDK keeps on `globalThis`.
 */

import { type EngineStepOptions, type EngineStepSite, idOf, wrapEngineStep } from './engine-step.js';
import { type CannotTellError, notInStep } from './identity.js';

export type { EngineStepOptions, StepReconcileAnswer, StepReconcileRequest } from './engine-step.js';
export { currentKey } from '../core/call-context.js';

const WHERE = 'idempotent-tools/trigger';

/** What this helper reads of the task context (`ctx` as `run(payload, { ctx })` gets it). */
interface TaskContext {
  ctx?: { run?: { id?: unknown }; attempt?: { number?: unknown; id?: unknown } };
}

/** The running task attempt, as Trigger.dev names it; a refusal outside one. */
export function triggerRunSite(name: string): EngineStepSite | CannotTellError {
  const api = (globalThis as Record<symbol, unknown>)[Symbol.for('dev.trigger.ts.api')] as Record<string, unknown> | undefined;
  const context = api?.['task-context'] as TaskContext | undefined;
  const ctx = context?.ctx;
  const runId = idOf(ctx?.run?.id);
  if (ctx === undefined || runId === undefined) return notInStep(WHERE, name, "a Trigger.dev task's run()");
  return {
    engine: 'trigger',
    ids: [['runId', runId]],
    attempt: ctx,
    // One ctx per attempt; the attempt's number too, should the SDK ever keep the object.
    within: idOf(ctx.attempt?.number) ?? idOf(ctx.attempt?.id) ?? '',
  };
}

/**
 * Wraps a side effect for Trigger.dev: called inside a task's `run()`, its first call in a
 * run runs once however often Trigger.dev retries the run (its second call in the run is
 * another call). Outside a task it refuses (`CannotTellError`, option `key`) unless `key`
 * names the call.
 */
export function idempotentStep<A extends unknown[], R>(fn: (...args: A) => R, options?: EngineStepOptions<A, R>): (...args: A) => Promise<Awaited<R>> {
  const name = () => options?.name ?? fn.name;
  return wrapEngineStep(WHERE, fn, options, () => triggerRunSite(name()));
}
