/** Keeps a claim's lease alive while its function runs, so a long call is never taken over. */

import type { Store } from './store.js';

const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Lease {
  stop(): void;
  /** True once a renewal was refused: another caller took the record over. */
  readonly lost: boolean;
}

export function keepLease(store: Store, key: string, token: string, leaseMs: number): Lease {
  let lost = false;
  if (store.renew === undefined) return { stop() {}, lost };
  const renew = store.renew.bind(store);
  let renewing = false;
  // Three renewals per lease: two can fail (a slow store, a busy event loop) before
  // the lease runs out.
  const timer = setInterval(() => {
    if (renewing) return;
    renewing = true;
    renew(key, token, leaseMs).then(
      (held) => {
        renewing = false;
        if (!held) {
          lost = true;
          clearInterval(timer);
        }
      },
      () => {
        renewing = false; // a store outage: keep trying while the lease lasts
      },
    );
  }, Math.min(Math.max(leaseMs / 3, 1), MAX_TIMER_MS));
  timer.unref();
  return {
    stop: () => clearInterval(timer),
    get lost() {
      return lost;
    },
  };
}
