/**
 * One crossing for a burst: calls of one kind issued in the same turn of the event loop
 * (before its microtasks run out) go to the native store as one batch, and one reply
 * settles them all. A native store that offers `acquireBatch`/`completeBatch` (Redis
 * today; SQLite's writer could take a batch the same way and commit it as one group)
 * is wrapped with `batched()`; every other method passes through.
 */

import type * as native from '../core/native.js';
import type { NativeStore } from './native-store.js';

export interface Reply<T> {
  error?: string | null;
  value?: T;
}

/**
 * Queues calls until the current microtasks are done, then sends them as one batch. With
 * `maxInFlight`, at most that many batches are outstanding: calls made meanwhile wait for
 * one to come back and go together in the next (the busier the store, the larger the
 * batches; an idle store still sends at once).
 */
export class Batcher<Req, Res> {
  #queue: Array<{ req: Req; resolve: (r: Res) => void; reject: (e: unknown) => void }> = [];
  #inFlight = 0;

  constructor(
    private readonly send: (reqs: Req[]) => Promise<Array<Reply<Res>>>,
    private readonly maxInFlight = Infinity,
  ) {}

  call(req: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      if (this.#queue.push({ req, resolve, reject }) === 1) queueMicrotask(() => this.#flush());
    });
  }

  #flush(): void {
    if (this.#queue.length === 0 || this.#inFlight >= this.maxInFlight) return; // sent when one comes back
    const jobs = this.#queue;
    this.#queue = [];
    this.#inFlight++;
    const sent = this.send(jobs.map((j) => j.req));
    sent.then(
      () => this.#landed(),
      () => this.#landed(),
    );
    sent.then(
      (replies) => {
        jobs.forEach((job, i) => {
          const r = replies[i];
          if (r === undefined) job.reject(new Error('the native store answered a batch with fewer replies than calls'));
          else if (r.error != null) job.reject(new Error(r.error));
          else job.resolve(r.value as Res);
        });
      },
      (err: unknown) => {
        for (const job of jobs) job.reject(err);
      },
    );
  }

  #landed(): void {
    this.#inFlight--;
    this.#flush();
  }
}

/** The batch methods a native store may add to `NativeStore`. */
export interface BatchingNativeStore extends NativeStore {
  acquireBatch(requests: native.AcquireRequest[]): Promise<Array<{ outcome?: native.AcquireOutcome | null; error?: string | null }>>;
  completeBatch(requests: native.SettleRequest[]): Promise<Array<{ settled?: boolean | null; error?: string | null }>>;
}

/**
 * `store` with `acquire` and `complete` sent in batches, one crossing per turn;
 * `maxInFlight` bounds the outstanding batches of each kind (see Batcher).
 */
export function batched(store: BatchingNativeStore, maxInFlight = Infinity): NativeStore {
  const acquires = new Batcher<native.AcquireRequest, native.AcquireOutcome>(
    async (reqs) => (await store.acquireBatch(reqs)).map((r) => ({ error: r.error, value: r.outcome ?? undefined })),
    maxInFlight,
  );
  const completes = new Batcher<native.SettleRequest, boolean>(
    async (reqs) => (await store.completeBatch(reqs)).map((r) => ({ error: r.error, value: r.settled ?? undefined })),
    maxInFlight,
  );
  return {
    get path() {
      return store.path;
    },
    acquire: (r) => acquires.call(r),
    complete: (r) => completes.call(r),
    renew: (key, token, leaseMs) => store.renew(key, token, leaseMs),
    fail: (r) => store.fail(r),
    release: (key, reconcile) => store.release(key, reconcile),
    expireSettled: (keys, expiresAt) => store.expireSettled(keys, expiresAt),
    clear: (key) => store.clear(key),
    prune: () => store.prune(),
    get: (key) => store.get(key),
    listRecords: (status, limit) => store.listRecords(status, limit),
    stats: () => store.stats(),
    close: () => store.close(),
  };
}
