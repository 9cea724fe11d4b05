/** The wrapped call that is running: `currentKey()`, and what `step()` needs of it. */

import { AsyncLocalStorage } from 'node:async_hooks';

import type { RecordMeta, Store } from './store.js';

/** What a running wrapped call shares with code it runs (`currentKey()`, `step()`). */
export interface RunningCall {
  /** The call's idempotency key. */
  key: string;
  /** The call's fingerprint (its name and arguments): a step belongs to one call, not to a key. */
  fingerprint: string;
  /** The wrapped function's name. */
  name: string;
  /** The store the call's record lives in. */
  store: Store;
  /** The call's options that steps inherit. */
  leaseMs: number;
  /** The call's `maxResultBytes`, which its steps' results are held to (default: the default limit). */
  maxResultBytes?: number;
  /** The keys of the steps this run of the call ran or replayed (nested steps too): once
   * the call completes with `ttlMs`, they expire with it (see step.ts). */
  steps?: Set<string>;
  /** Where the call came from (scope, tool call id, framework, project), as its claim
   * recorded it: its steps' records carry it too, so `inspect --scope` finds them. */
  meta?: RecordMeta;
}

/**
 * @internal Not in the published types: they would name `node:async_hooks`, which a project
 * without Node's types (TypeScript 7 lists none by default) cannot resolve.
 */
export const running = new AsyncLocalStorage<RunningCall>();

/**
 * @internal A store whose calls cannot hold steps (idempotentTx's, where a step would
 * have to end the call's transaction) answers this symbol with the reason; `step()` is
 * then a TypeError that gives it.
 */
export const STEPS_REFUSED = Symbol.for('idempotent-tools.stepsRefused');

/**
 * Inside a running wrapped function (and anything it awaits): that call's idempotency
 * key. Pass it on as a downstream API's own idempotency key (Stripe's `Idempotency-Key`
 * header, say): then even a crash between the side effect and its record cannot
 * charge twice. Outside a wrapped call: `undefined`.
 */
export function currentKey(): string | undefined {
  return running.getStore()?.key;
}
