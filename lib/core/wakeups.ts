/**
 * In-process wake-ups for `onDuplicate: 'block'`. A waiter in the same process as the
 * key's owner is woken the moment the owner settles; a waiter whose owner is another
 * process finds out on its next poll.
 *
 * A waiter subscribes *before* it asks the store, so a settle that lands between the
 * store's answer ("pending") and the wait is not lost: the subscription has already
 * seen it, and the wait returns at once.
 *
 * A store that hears of settles in other processes (PostgresStore: LISTEN/NOTIFY) offers
 * `watchSettles`; a Watch subscribes to it too, so a waiter wakes when any process settles.
 *
 * A wait also ends the moment its request's signal fires (a cancel, a client gone): the
 * waiter then stops (idempotent.ts), and `close` releases what it subscribed to.
 */

import { onAbort } from './abort.js';
import type { WaitSignal } from './options.js';

/** The optional store hook: call `onSettled` when `key` may have been settled anywhere. */
export interface SettleSource {
  watchSettles(key: string, onSettled: () => void): () => void;
}

const watching = new WeakMap<object, Map<string, Set<Watch>>>();

export class Watch {
  #changed = false;
  #wake: (() => void) | undefined;
  readonly #unwatch: (() => void) | undefined;

  constructor(
    private readonly store: object,
    private readonly key: string,
  ) {
    let byKey = watching.get(store);
    if (byKey === undefined) watching.set(store, (byKey = new Map()));
    let set = byKey.get(key);
    if (set === undefined) byKey.set(key, (set = new Set()));
    set.add(this);
    this.#unwatch = (store as Partial<SettleSource>).watchSettles?.(key, () => this.changed());
  }

  /** Called by `notify`: the key's record changed. */
  changed(): void {
    this.#changed = true;
    this.#wake?.();
  }

  /** Resolves when the key changes (or already has since the last wait), after `ms`, or when `signal` fires. */
  wait(ms: number, signal?: WaitSignal): Promise<void> {
    if (this.#changed) {
      this.#changed = false;
      return Promise.resolve();
    }
    if (signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      const unlisten = signal === undefined ? undefined : onAbort(signal, done);
      function done() {
        clearTimeout(timer);
        unlisten?.();
        self.#wake = undefined;
        self.#changed = false;
        resolve();
      }
      this.#wake = done;
    });
  }

  /** Stops watching; must be called when the waiter is done. */
  close(): void {
    this.#unwatch?.();
    const byKey = watching.get(this.store);
    const set = byKey?.get(this.key);
    if (set === undefined) return;
    set.delete(this);
    if (set.size === 0) byKey!.delete(this.key);
  }
}

/** The key's record was settled in this process: wake everyone watching it. */
export function notify(store: object, key: string): void {
  const set = watching.get(store)?.get(key);
  if (set === undefined) return;
  for (const w of [...set]) w.changed();
}
