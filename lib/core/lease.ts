/**
 * Keeps a claim's lease alive while its function runs and while its outcome is being
 * recorded, so a live call is never taken over. A renewal that fails (a slow store, a
 * lock held past the busy timeout, a Redis timeout) is retried with backoff: only a
 * renewal the store refuses (another caller holds the record) means the lease is lost.
 */

import type { Store } from './store.js';

const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Lease {
  /** Stops renewing (the call has settled, or gives its claim up to run out). */
  stop(): void;
  /** Hands the claim back now (a renewal to a lease of 0 ms), so the next call takes it over at once. */
  end(): Promise<void>;
  /** True once a renewal was refused: another caller took the record over. */
  readonly lost: boolean;
  /** Until when (performance.now() time) the lease is known to last: the start of the
   * last renewal that succeeded, plus leaseMs. */
  readonly heldUntil: number;
}

/**
 * `claimedAt` is when the acquire request was sent (performance.now()), so the estimate
 * of the lease's end never runs later than the store's.
 */
export function keepLease(
  store: Store,
  key: string,
  token: string,
  leaseMs: number,
  claimedAt: number,
  onLost: () => void,
  onError: (err: unknown) => void,
): Lease {
  let lost = false;
  let stopped = false;
  let heldUntil = claimedAt + leaseMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const renew = store.renew?.bind(store);
  const every = Math.min(Math.max(leaseMs / 3, 1), MAX_TIMER_MS);
  // The first retry after a failed renewal comes soon; later ones back off, never
  // waiting longer than the regular interval.
  const firstRetry = Math.max(1, Math.min(100, leaseMs / 10));
  let failures = 0;

  const schedule = (ms: number) => {
    if (stopped || lost || renew === undefined) return;
    timer = setTimeout(tick, Math.min(ms, MAX_TIMER_MS));
    timer.unref();
  };
  const tick = () => {
    const sentAt = performance.now();
    renew!(key, token, leaseMs).then(
      (held) => {
        if (stopped) return;
        if (!held) {
          lost = true;
          onLost();
          return;
        }
        failures = 0;
        heldUntil = Math.max(heldUntil, sentAt + leaseMs);
        schedule(every);
      },
      (err) => {
        if (stopped) return;
        onError(err);
        // Not refused, only not answered: keep trying. Even past heldUntil a renewal can
        // still succeed (nobody took the record over), and then the lease holds again.
        failures++;
        schedule(Math.min(firstRetry * 2 ** (failures - 1), every));
      },
    );
  };
  schedule(every);

  const stop = () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
  };
  return {
    stop,
    async end() {
      stop();
      if (renew === undefined || lost) return;
      try {
        await renew(key, token, 0);
      } catch {
        // Could not hand it back: it runs out after leaseMs instead.
      }
    },
    get lost() {
      return lost;
    },
    get heldUntil() {
      return heldUntil;
    },
  };
}
