/**
 * `idempotent-tools/temporal`: a side effect inside a Temporal activity, run once per activity
 * whatever Temporal retries.
 *
 *     export const chargeCard = idempotentActivity(async function chargeCard(order) { ... });
 *
 * Register it as an activity, or call it from one. The key is the activity as Temporal names
 * it (namespace, workflow id, run id, activity id: the run id and activity id are what
 * Temporal's docs tell users to combine), and how many times this attempt of the activity
 * called it before; `currentKey()` inside it is that key, for the provider's own idempotency
 * key. The lease follows the activity's timer: its heartbeat timeout when it has one, else its
 * start-to-close timeout, so a retry after a dead worker takes the claim over (asking
 * `reconcile`) about when Temporal retries, and a retry of a slow attempt that still runs
 * waits for it. Nothing of Temporal is imported: the activity's context is read from the
 * storage `@temporalio/activity` keeps on `globalThis`.
 */

import { type EngineStepOptions, type EngineStepSite, globalStorage, idOf, wrapEngineStep } from './engine-step.js';
import { type CannotTellError, notInStep } from './identity.js';

export type { EngineStepOptions, StepReconcileAnswer, StepReconcileRequest } from './engine-step.js';
export { currentKey } from '../core/call-context.js';

const WHERE = 'idempotent-tools/temporal';

/** What this helper reads of `Context.current()` (`@temporalio/activity`). */
interface ActivityContext {
  info?: {
    activityId?: unknown;
    activityRunId?: unknown;
    namespace?: unknown;
    workflowNamespace?: unknown;
    workflowExecution?: { workflowId?: unknown; runId?: unknown };
    heartbeatTimeoutMs?: unknown;
    startToCloseTimeoutMs?: unknown;
    scheduleToCloseTimeoutMs?: unknown;
  };
  cancellationSignal?: unknown;
}

function positive(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}

/** The running activity, as Temporal names it; a refusal outside one. */
export function activitySite(name: string): EngineStepSite | CannotTellError {
  const context = globalStorage('__temporal_activity_context_storage__')?.getStore() as ActivityContext | undefined;
  const info = context?.info;
  const activityId = idOf(info?.activityId);
  if (context === undefined || info === undefined || activityId === undefined) return notInStep(WHERE, name, 'a Temporal activity');
  const namespace = idOf(info.workflowNamespace) ?? idOf(info.namespace) ?? '';
  const workflowId = idOf(info.workflowExecution?.workflowId);
  const runId = idOf(info.workflowExecution?.runId);
  let ids: Array<[string, string]>;
  if (workflowId !== undefined && runId !== undefined) {
    ids = [['namespace', namespace], ['workflowId', workflowId], ['runId', runId], ['activityId', activityId]];
  } else {
    // A standalone activity (started by a client, no workflow): its run id is its execution.
    const activityRunId = idOf(info.activityRunId);
    if (activityRunId === undefined) return notInStep(WHERE, name, 'an activity Temporal names (this one has neither a workflow run nor an activity run id)');
    ids = [['namespace', namespace], ['activityId', activityId], ['activityRunId', activityRunId]];
  }
  return {
    engine: 'temporal',
    ids,
    attempt: context,
    // Temporal retries an attempt after its heartbeat timeout (when set) or its start-to-close timeout.
    timerMs: positive(info.heartbeatTimeoutMs) ?? positive(info.startToCloseTimeoutMs) ?? positive(info.scheduleToCloseTimeoutMs),
    signal: context.cancellationSignal,
  };
}

/**
 * Wraps a side effect for Temporal: called inside an activity (or registered as one), it runs
 * once per activity and occurrence, however often Temporal retries the activity; a retry gets
 * the first attempt's stored result. Outside an activity it refuses (`CannotTellError`,
 * option `key`) unless `key` names the call.
 */
export function idempotentActivity<A extends unknown[], R>(fn: (...args: A) => R, options?: EngineStepOptions<A, R>): (...args: A) => Promise<Awaited<R>> {
  const name = () => options?.name ?? fn.name;
  return wrapEngineStep(WHERE, fn, options, () => activitySite(name()));
}
