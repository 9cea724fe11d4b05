/**
 * `idempotent-tools/inngest`: a side effect inside an Inngest `step.run`, run once per step
 * whatever Inngest retries.
 *
 *     const chargeCard = idempotentStep(async function chargeCard(order) { ... });
 *     await step.run('charge', () => chargeCard(event.data.order));
 *
 * The key is the function run's `runId` and the step's id as Inngest keeps it (a loop that
 * runs `step.run('charge')` twice has two ids), and how many times this attempt of the step
 * called it before. Inngest records a step's result when the request that ran it returns: a
 * side effect whose request died (a killed process, a timeout) runs again on the retry, and
 * the record written here replays it. Nothing of Inngest is imported: the step is read from
 * the async context the SDK keeps on `globalThis`.
 */

import { type EngineStepOptions, type EngineStepSite, globalStorage, idOf, wrapEngineStep } from './engine-step.js';
import { type CannotTellError, notInStep } from './identity.js';

export type { EngineStepOptions, StepReconcileAnswer, StepReconcileRequest } from './engine-step.js';
export { currentKey } from '../core/call-context.js';

const WHERE = 'idempotent-tools/inngest';

/** What this helper reads of the SDK's async context (`inngest/experimental`'s `getAsyncCtx()`). */
interface InngestAsyncContext {
  execution?: {
    ctx?: { runId?: unknown };
    executingStep?: { id?: unknown; hashedId?: unknown };
  };
}

/** The running step, as Inngest names it; a refusal outside one. */
export function inngestStepSite(name: string): EngineStepSite | CannotTellError {
  const storage = (globalThis as Record<symbol, unknown>)[Symbol.for('inngest:als')] as { resolved?: { getStore(): unknown } } | undefined;
  const store = (storage?.resolved ?? globalStorage('inngest:als'))?.getStore() as InngestAsyncContext | undefined;
  const execution = store?.execution;
  const runId = idOf(execution?.ctx?.runId);
  const step = execution?.executingStep;
  const stepId = idOf(step?.hashedId) ?? idOf(step?.id);
  if (execution === undefined || runId === undefined || stepId === undefined) return notInStep(WHERE, name, "an Inngest step (step.run's callback)");
  return {
    engine: 'inngest',
    ids: [['runId', runId], ['step', stepId]],
    // One request may run several steps: the request's execution, within the step.
    attempt: execution,
    within: stepId,
  };
}

/**
 * Wraps a side effect for Inngest: called inside `step.run`, it runs once per step and
 * occurrence, however often Inngest retries the step. Outside a step it refuses
 * (`CannotTellError`, option `key`) unless `key` names the call.
 */
export function idempotentStep<A extends unknown[], R>(fn: (...args: A) => R, options?: EngineStepOptions<A, R>): (...args: A) => Promise<Awaited<R>> {
  const name = () => options?.name ?? fn.name;
  return wrapEngineStep(WHERE, fn, options, () => inngestStepSite(name()));
}
