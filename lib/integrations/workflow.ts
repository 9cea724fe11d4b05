/**
 * `idempotent-tools/workflow`: a side effect inside a Vercel Workflow step (a `"use step"`
 * function), run once per step whatever the workflow retries.
 *
 *     async function chargeCard(order) { 'use step'; return charge(order); }  // before
 *     const charge = idempotentStep(async function charge(order) { ... });     // called in the step
 *
 * The key is the step's `stepId` (`getStepMetadata()`: unique per step call, stable across its
 * retries; Vercel's docs use it as the idempotency key) within its `workflowRunId`, and how many
 * times this attempt of the step called it before. Nothing of `workflow` is imported: the step
 * is read from the context storage the runtime keeps on `globalThis`.
 */

import { type EngineStepOptions, type EngineStepSite, globalStorage, idOf, wrapEngineStep } from './engine-step.js';
import { type CannotTellError, notInStep } from './identity.js';

export type { EngineStepOptions, StepReconcileAnswer, StepReconcileRequest } from './engine-step.js';
export { currentKey } from '../core/call-context.js';

const WHERE = 'idempotent-tools/workflow';

/** What this helper reads of the step context (`getStepMetadata()`, `getWorkflowMetadata()`). */
interface StepContext {
  stepMetadata?: { stepId?: unknown };
  workflowMetadata?: { workflowRunId?: unknown };
}

/** The running step, as the workflow runtime names it; a refusal outside one. */
export function workflowStepSite(name: string): EngineStepSite | CannotTellError {
  const context = globalStorage('WORKFLOW_STEP_CONTEXT_STORAGE')?.getStore() as StepContext | undefined;
  const stepId = idOf(context?.stepMetadata?.stepId);
  if (context === undefined || stepId === undefined) return notInStep(WHERE, name, 'a workflow step (a "use step" function)');
  const runId = idOf(context.workflowMetadata?.workflowRunId);
  return {
    engine: 'workflow',
    ids: runId === undefined ? [['stepId', stepId]] : [['workflowRunId', runId], ['stepId', stepId]],
    attempt: context,
  };
}

/**
 * Wraps a side effect for Vercel Workflow: called inside a step function, it runs once per
 * step and occurrence, however often the step is retried. Outside a step it refuses
 * (`CannotTellError`, option `key`) unless `key` names the call.
 */
export function idempotentStep<A extends unknown[], R>(fn: (...args: A) => R, options?: EngineStepOptions<A, R>): (...args: A) => Promise<Awaited<R>> {
  const name = () => options?.name ?? fn.name;
  return wrapEngineStep(WHERE, fn, options, () => workflowStepSite(name()));
}
