/**
 * Keeps a claim's lease alive while its function runs and while its outcome is being
 * recorded, so a live call is never taken over. A renewal that fails (a slow store, a
 * lock held past the busy timeout, a Redis timeout) is retried with backoff: only a
 * renewal the store refuses (another caller holds the record) means the lease is lost.
 *
 * The lease is counted from when the claim (or the renewal) was sent, on this process's
 * monotonic clock: the store started counting later, so this end is never later than the
 * store's. A claim whose reply arrives late (a stalled network, a paused process or VM)
 * may already be over on the store and taken over by another caller: `mayStart` says
 * whether `fn` may still start under it.
 */

import { CLAIMS_LOCKED, type Store } from './store.js';

const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * `fn` starts only while more than this share of the lease is still ahead of it. What it
 * leaves covers the time between the check and `fn`'s first request, and the first renewal's
 * round trip; a claim answered later than that is handed back unused (see idempotent.ts).
 */
export const START_MARGIN = 0.2;

/** What running under a claim comes to when the claim was too late for fn to start: it was handed back unused. */
export const HANDED_BACK: unique symbol = Symbol('handed back');
/** Late claims in a row before a call gives up (fn never ran: a StoreError). */
export const MAX_LATE_CLAIMS = 3;

/** Why a call (or a step) gave up after MAX_LATE_CLAIMS late claims, and what to do. */
export function tooLate(count: number, leaseMs: number): string {
  return (
    `${count} claims of it were answered by the store too late to run under their lease (leaseMs ${leaseMs}; ` +
    `fn starts only while more than ${Math.round(START_MARGIN * 100)}% of the lease is ahead). The store or the network is ` +
    "slower than the lease allows, or this process was paused: raise leaseMs, or look at the store's latency"
  );
}

export interface Lease {
  /** Stops renewing (the call has settled, or gives its claim up to run out). */
  stop(): void;
  /** Hands the claim back now (a renewal to a lease of 0 ms), so the next call takes it over at once. */
  end(): Promise<void>;
  /**
   * True once a renewal was refused: another caller took the record over, or (once
   * `settling` was called) this call's own settle, applied, ended the claim.
   */
  readonly lost: boolean;
  /**
   * The settle's write is being sent: from now on a refused renewal may be that write,
   * applied with its reply lost, so it stops the renewals but is not reported (`onLost`)
   * as a takeover; the settle reads the record to tell.
   */
  settling(): void;
  /** Until when (performance.now() time) the lease is known to last: when the claim or
   * the last renewal that succeeded was sent, plus leaseMs. */
  readonly heldUntil: number;
  /** Whether `fn` may start now: the lease is held for more than START_MARGIN of leaseMs yet. */
  mayStart(): boolean;
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
  return new KeptLease(store, key, token, leaseMs, claimedAt, onLost, onError);
}

/**
 * A class, not a closure per method: every new call keeps a lease, and its methods then
 * live once on the prototype instead of being allocated with each call (issue 39: the
 * event loop's worst delays at a high call rate are mostly young-generation GC).
 */
class KeptLease implements Lease {
  #lost = false;
  #stopped = false;
  #settling = false;
  #heldUntil: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #failures = 0;
  readonly #every: number;
  // The first retry after a failed renewal comes soon; later ones back off, never
  // waiting longer than the regular interval.
  readonly #firstRetry: number;
  readonly #tick = () => this.#renewNow();

  constructor(
    private readonly store: Store,
    private readonly key: string,
    private readonly token: string,
    private readonly leaseMs: number,
    claimedAt: number,
    private readonly onLost: () => void,
    private readonly onError: (err: unknown) => void,
  ) {
    this.#heldUntil = claimedAt + leaseMs;
    this.#every = Math.min(Math.max(leaseMs / 3, 1), MAX_TIMER_MS);
    this.#firstRetry = Math.max(1, Math.min(100, leaseMs / 10));
    // Renewals are timed from the claim's sending, not from its reply: a reply that came
    // late must not push the first renewal past the lease's end.
    this.#schedule(Math.max(0, claimedAt + this.#every - performance.now()));
  }

  #schedule(ms: number): void {
    if (this.#stopped || this.#lost || this.store.renew === undefined) return;
    this.#timer = setTimeout(this.#tick, Math.min(ms, MAX_TIMER_MS));
    this.#timer.unref();
  }

  #renewNow(): void {
    const sentAt = performance.now();
    this.store.renew!(this.key, this.token, this.leaseMs).then(
      (held) => {
        if (this.#stopped) return;
        if (!held) {
          this.#lost = true;
          if (!this.#settling) this.onLost();
          return;
        }
        this.#failures = 0;
        this.#heldUntil = Math.max(this.#heldUntil, sentAt + this.leaseMs);
        this.#schedule(this.#every);
      },
      (err) => {
        if (this.#stopped) return;
        this.onError(err);
        // Not refused, only not answered: keep trying. Even past heldUntil a renewal can
        // still succeed (nobody took the record over), and then the lease holds again.
        this.#failures++;
        this.#schedule(Math.min(this.#firstRetry * 2 ** (this.#failures - 1), this.#every));
      },
    );
  }

  settling(): void {
    this.#settling = true;
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }

  async end(): Promise<void> {
    this.stop();
    if (this.store.renew === undefined || this.#lost) return;
    try {
      await this.store.renew(this.key, this.token, 0);
    } catch {
      // Could not hand it back: it runs out after leaseMs instead.
    }
  }

  get lost(): boolean {
    return this.#lost;
  }

  get heldUntil(): number {
    return this.#heldUntil;
  }

  mayStart(): boolean {
    if ((this.store as { [CLAIMS_LOCKED]?: boolean })[CLAIMS_LOCKED] === true) return true;
    return !this.#lost && performance.now() + this.leaseMs * START_MARGIN < this.#heldUntil;
  }
}
