/**
 * One crossing for a burst: calls of one kind issued in the same turn of the event loop
 * (before its microtasks run out) go to the native store as one batch, and one reply
 * settles them all. A native store that offers `acquireBatch`/`completeBatch` (PostgreSQL,
 * SQLite) is wrapped with `batched()`; every other method passes through.
 *
 * A batch fails as a whole only when the crossing itself does (the store closed, a bug);
 * each call's own trouble is its own reply. So a request joins a batch only once it can
 * cross: NativeBackedStore checks each one first (requests.ts), and one that cannot is
 * refused alone, before it is queued, and no other call waits for it.
 */

import type * as native from '../core/native.js';
import type { NativeStore } from './native-store.js';

export interface Reply<T> {
  error?: string | null;
  value?: T;
}

/**
 * When a batch is sent. `'microtask'`: once the current microtasks are done. `'turn'`: in
 * the check phase of the loop (`setImmediate`), so the calls issued by every callback of
 * this phase go together: a tool that awaits I/O resumes in a callback of its own, with
 * microtasks drained between callbacks, and a burst of such calls would otherwise go one
 * per batch. An idle loop reaches the check phase at once, so a lone call waits for no
 * other (and for no timer).
 */
export type Gather = 'microtask' | 'turn';

/**
 * Queues calls until `gather` says, then sends them as one batch. With `maxInFlight`, at
 * most that many batches are outstanding: calls made meanwhile wait for one to come back
 * and go together in the next (the busier the store, the larger the batches; an idle
 * store still sends at once).
 */
export class Batcher<Req, Res> {
  #queue: Array<{ req: Req; resolve: (r: Res) => void; reject: (e: unknown) => void }> = [];
  #inFlight = 0;

  constructor(
    private readonly send: (reqs: Req[]) => Promise<Array<Reply<Res>>>,
    private readonly maxInFlight = Infinity,
    private readonly gather: Gather = 'microtask',
  ) {}

  call(req: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      if (this.#queue.push({ req, resolve, reject }) === 1) {
        if (this.gather === 'turn') setImmediate(() => this.#flush());
        else queueMicrotask(() => this.#flush());
      }
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
 * `maxInFlight` bounds the outstanding batches of each kind, `gather` says when a batch
 * is sent (see Batcher).
 */
export function batched(store: BatchingNativeStore, maxInFlight = Infinity, gather: Gather = 'microtask'): NativeStore {
  const acquires = new Batcher<native.AcquireRequest, native.AcquireOutcome>(
    async (reqs) => (await store.acquireBatch(reqs)).map((r) => ({ error: r.error, value: r.outcome ?? undefined })),
    maxInFlight,
    gather,
  );
  const completes = new Batcher<native.SettleRequest, boolean>(
    async (reqs) => (await store.completeBatch(reqs)).map((r) => ({ error: r.error, value: r.settled ?? undefined })),
    maxInFlight,
    gather,
  );
  // SQLite's own extras (its filtered listing and synchronous replay reads) pass through
  // when the store has them; they stay absent when it has not (see NativeBackedStore).
  const extras: Partial<NativeStore> = {};
  if (store.listRecent) extras.listRecent = (q) => store.listRecent!(q);
  if (store.peekReplay) extras.peekReplay = (key, fp) => store.peekReplay!(key, fp);
  if (store.replayCall) extras.replayCall = (name, ctx, payload) => store.replayCall!(name, ctx, payload);
  return {
    ...extras,
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
