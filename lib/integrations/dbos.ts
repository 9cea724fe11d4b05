/**
 * `idempotent-tools/dbos`: a side effect inside a DBOS step, run once per step whatever DBOS
 * retries or recovers.
 *
 *     const chargeCard = idempotentStep(async function chargeCard(order) { ... });
 *     await DBOS.runStep(() => chargeCard(order), { name: 'charge' });
 *
 * The key is `DBOS.workflowID` and `DBOS.stepID` (the step's number in its workflow: stable
 * when a recovered workflow runs again, another for each step of a loop), and how many times
 * this attempt of the step called it before. DBOS records a step's result after it returns: a
 * process that died in between runs the step again when it recovers the workflow, and the
 * record written here replays it. (A DBOS transaction needs nothing: DBOS commits its record
 * with the transaction, as `idempotentTx` does.) `@dbos-inc/dbos-sdk` is loaded when the
 * wrapped function is first called, never when this module is.
 */

import { createRequire } from 'node:module';
import { join } from 'node:path';

import { type EngineStepOptions, type EngineStepSite, idOf, wrapEngineStep } from './engine-step.js';
import { type CannotTellError, notInStep } from './identity.js';

export type { EngineStepOptions, StepReconcileAnswer, StepReconcileRequest } from './engine-step.js';
export { currentKey } from '../core/call-context.js';

const WHERE = 'idempotent-tools/dbos';

/** What this helper reads of the `DBOS` class. */
interface DbosStatics {
  workflowID?: unknown;
  stepID?: unknown;
  stepStatus?: { cancelSignal?: unknown } | undefined;
  isInStep?: () => boolean;
  isInTransaction?: () => boolean;
}

let dbos: DbosStatics | undefined;

/**
 * The application's `DBOS` (its context lives in a module-level AsyncLocalStorage, so it must be
 * the copy the application runs): as this package resolves it, else as the application's
 * folder does (a linked install).
 */
function loadDbos(): DbosStatics {
  if (dbos !== undefined) return dbos;
  const attempts = [require, createRequire(join(process.cwd(), 'noop.js'))];
  let failure: unknown;
  for (const load of attempts) {
    try {
      dbos = (load('@dbos-inc/dbos-sdk') as { DBOS: DbosStatics }).DBOS;
      return dbos;
    } catch (err) {
      failure = err;
    }
  }
  throw new TypeError(`${WHERE}: cannot load @dbos-inc/dbos-sdk (install it: npm install @dbos-inc/dbos-sdk)`, { cause: failure });
}

/** The running step, as DBOS names it; a refusal outside one. */
export function dbosStepSite(name: string): EngineStepSite | CannotTellError {
  const DBOS = loadDbos();
  const workflowId = idOf(DBOS.workflowID);
  const inStep = DBOS.isInStep?.() === true;
  const stepId = inStep ? idOf(DBOS.stepID) : undefined;
  const status = DBOS.stepStatus;
  if (workflowId === undefined || stepId === undefined || status === undefined || status === null) {
    const inTx = workflowId !== undefined && DBOS.isInTransaction?.() === true;
    return notInStep(
      WHERE,
      name,
      inTx
        ? 'a DBOS step (this is a transaction: DBOS commits its record with it, so it needs no wrapper)'
        : workflowId !== undefined
          ? 'a DBOS step (in workflow code outside a step; DBOS.runStep(fn, { name }) or a registered step runs it as one)'
          : 'a DBOS workflow step',
    );
  }
  return {
    engine: 'dbos',
    ids: [['workflowID', workflowId], ['stepID', stepId]],
    // DBOS makes a new status object for each attempt of a step.
    attempt: status,
    signal: status.cancelSignal,
  };
}

/**
 * Wraps a side effect for DBOS: called inside a step, it runs once per step and occurrence,
 * however often DBOS retries the step or recovers its workflow. Outside a step it refuses
 * (`CannotTellError`, option `key`) unless `key` names the call.
 */
export function idempotentStep<A extends unknown[], R>(fn: (...args: A) => R, options?: EngineStepOptions<A, R>): (...args: A) => Promise<Awaited<R>> {
  const name = () => options?.name ?? fn.name;
  return wrapEngineStep(WHERE, fn, options, () => dbosStepSite(name()));
}
