/** `currentKey()`: the key of the wrapped call that is running, for downstream idempotency headers. */

import { AsyncLocalStorage } from 'node:async_hooks';

export const running = new AsyncLocalStorage<string>();

/**
 * Inside a running wrapped function (and anything it awaits): that call's idempotency
 * key. Pass it on as a downstream API's own idempotency key (Stripe's `Idempotency-Key`
 * header, say): then even a crash between the side effect and its record cannot
 * charge twice. Outside a wrapped call: `undefined`.
 */
export function currentKey(): string | undefined {
  return running.getStore();
}
