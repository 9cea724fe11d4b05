/**
 * What SqliteStore and RedisStore share: they forward to their native half, turn its
 * JSON text into parsed records, and turn its failures into `StoreError`. The native
 * half is opened asynchronously (never blocking the JavaScript thread); a failure to
 * open surfaces as a `StoreError` on the first call, or from `ready()`.
 */

import { asStoreError } from '../core/errors.js';
import { listRecentFallback } from '../core/record-query.js';
import { RefusedInputError } from '../core/refused-input.js';
import { withoutKeyIdSecret } from '../core/key-id.js';
import type * as native from '../core/native.js';
import { type TextRule, checkAcquire, checkRenew, checkSettle } from './requests.js';
import {
  type AcquireRequest,
  type AcquireResult,
  type IdempotencyRecord,
  type ListOptions,
  REPLAY_DERIVED,
  type RecentQuery,
  type RecentRecords,
  type RecordStatus,
  type ReleaseOptions,
  type ReplayHit,
  type SettleRequest,
  type Store,
  type StoreStats,
  releaseReconciles,
} from '../core/store.js';

/** The methods both native stores export (see src/sqlite/mod.rs and src/redis_store/). */
export interface NativeStore {
  readonly path: string;
  acquire(request: native.AcquireRequest): Promise<native.AcquireOutcome>;
  renew(key: string, token: string, leaseMs: number): Promise<boolean>;
  complete(request: native.SettleRequest): Promise<boolean>;
  fail(request: native.SettleRequest): Promise<boolean>;
  release(key: string, reconcile?: boolean | null): Promise<boolean>;
  expireSettled(keys: string[], expiresAt: number): Promise<number>;
  clear(key?: string | null): Promise<number>;
  prune(): Promise<number>;
  get(key: string): Promise<native.NativeRecord | null>;
  listRecords(status?: string | null, limit?: number | null): Promise<native.NativeRecord[]>;
  stats(): Promise<native.NativeStats>;
  /** The filtered listing of SQLite (src/sqlite/listing.rs) and Postgres (src/postgres/sql/recent.sql); Redis has none. */
  listRecent?(query: native.RecentQuery): Promise<native.RecentRecords>;
  close(): Promise<void>;
  peekReplay?(key: string, fingerprint: string): native.ReplayHit | null;
  /** SQLite's replay fast path in one crossing (see `REPLAY_DERIVED`). */
  replayCall?(name: string, context: string | null, payload: string): string | null;
}

/** The fields the native records gain for `inspect` (optional until every store has them). */
type WithMeta = native.NativeRecord & { meta?: string | null; durationMs?: number | null; namespace?: string | null };

export function toRecord(r: WithMeta): IdempotencyRecord {
  return {
    key: r.key,
    name: r.name,
    status: r.status as RecordStatus,
    result: r.result == null ? undefined : JSON.parse(r.result),
    error: r.error == null ? null : JSON.parse(r.error),
    attempts: r.attempts,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    expiresAt: r.expiresAt ?? null,
    fingerprint: r.fingerprint,
    leaseExpiresAt: r.leaseExpiresAt ?? null,
    meta: r.meta == null ? null : JSON.parse(r.meta),
    durationMs: r.durationMs ?? null,
    ...(r.namespace == null ? {} : { namespace: r.namespace }),
  };
}

/** A native claim's outcome, as the call protocol reads it. */
function acquireResult(out: native.AcquireOutcome): AcquireResult {
  if (out.acquired) return { acquired: true, token: out.token!, attempts: out.attempts, takenOver: out.takenOver };
  return { acquired: false, record: toRecord(out.record!) };
}

/** What a store call that failed rejects with: bad input as itself, anything else as a StoreError. */
function storeFailure(err: unknown, key: string | undefined): unknown {
  return err instanceof RefusedInputError ? err : asStoreError(err, key);
}

function toSettle(r: SettleRequest): native.SettleRequest {
  return {
    key: r.key,
    token: r.token,
    result: r.resultJson,
    error: r.error == null ? undefined : JSON.stringify({ name: r.error.name, message: r.error.message }),
    ttlMs: r.ttlMs,
    ...(r.durationMs === undefined ? {} : { durationMs: r.durationMs }),
  } as native.SettleRequest;
}

export abstract class NativeBackedStore implements Store {
  #native: NativeStore | undefined;
  #opening: Promise<NativeStore> | undefined;
  #closed = false;

  /**
   * `textRule`: the store's own rule for the strings of a call's request (see
   * requests.ts), besides crossing exactly.
   */
  protected constructor(
    private readonly open: () => Promise<NativeStore>,
    private readonly textRule?: TextRule,
  ) {
    this.#opening = this.#start();
  }

  /** Starts opening; a failed open is forgotten, so the next call tries again (the disk
   * may have been full, the server down, the folder read-only, for a while). */
  #start(): Promise<NativeStore> {
    const opening = this.open().then(
      (n) => {
        this.#native = n;
        return n;
      },
      (err) => {
        if (this.#opening === opening) this.#opening = undefined;
        throw err;
      },
    );
    // The failure is reported to whoever calls next (or ready()), not as an unhandled rejection.
    opening.catch(() => {});
    return opening;
  }

  /** True after `close()`. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Resolves once the store is open; rejects with the `StoreError` that opening gave. */
  async ready(): Promise<void> {
    await this.#use();
  }

  async #use(key?: string): Promise<NativeStore> {
    if (this.#closed) throw asStoreError(new Error('the store is closed'), key);
    try {
      return this.#native ?? (await (this.#opening ??= this.#start()));
    } catch (err) {
      throw asStoreError(err, key);
    }
  }

  /**
   * `op` on the open native store, its answer through `map`; its failure as a StoreError
   * (bad input as itself; a throw in `map` as itself). An open store is used at once, with
   * one promise for the answer: every call crosses here twice (claim, settle), and an
   * async function with its awaits would cost each crossing more promises (issue 39:
   * allocation per call, the event loop's GC pauses).
   */
  #call<T, U = T>(key: string | undefined, op: (n: NativeStore) => Promise<T>, map?: (answer: T) => U): Promise<U> {
    const n = this.#native;
    if (n === undefined || this.#closed) return this.#callOnceOpen(key, op, map);
    try {
      return op(n).then(map as (answer: T) => U, (err: unknown) => {
        throw storeFailure(err, key);
      });
    } catch (err) {
      return Promise.reject(storeFailure(err, key));
    }
  }

  /** `#call` before the store has opened (or after it closed: then it says so). */
  async #callOnceOpen<T, U>(key: string | undefined, op: (n: NativeStore) => Promise<T>, map?: (answer: T) => U): Promise<U> {
    const n = await this.#use(key);
    let answer: T;
    try {
      answer = await op(n);
    } catch (err) {
      throw storeFailure(err, key);
    }
    return map === undefined ? (answer as unknown as U) : map(answer);
  }

  // acquire, renew, complete and fail check their request first (requests.ts): one that
  // cannot cross is refused alone, before it joins the turn's batch (batch.ts).

  acquire(request: AcquireRequest): Promise<AcquireResult> {
    let meta: string | undefined;
    try {
      meta = checkAcquire(request, `${this.constructor.name}.acquire`, this.textRule);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#call(request.key, (n) => n.acquire({ ...request, meta } as native.AcquireRequest), acquireResult);
  }

  renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    try {
      checkRenew(key, token, leaseMs, `${this.constructor.name}.renew`, this.textRule);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#call(key, (n) => n.renew(key, token, leaseMs));
  }

  complete(request: SettleRequest): Promise<boolean> {
    return this.#settle('complete', request);
  }

  fail(request: SettleRequest): Promise<boolean> {
    return this.#settle('fail', request);
  }

  #settle(op: 'complete' | 'fail', request: SettleRequest): Promise<boolean> {
    try {
      checkSettle(request, `${this.constructor.name}.${op}`, this.textRule);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#call(request.key, (n) => n[op](toSettle(request)));
  }

  async release(key: string, options?: ReleaseOptions): Promise<boolean> {
    const reconcile = releaseReconciles(options);
    return this.#call(key, (n) => n.release(key, reconcile));
  }

  /** See `Store.expireSettled`. */
  expireSettled(keys: string[], expiresAt: number): Promise<number> {
    return this.#call(keys[0], (n) => n.expireSettled(keys, expiresAt));
  }

  clear(key?: string): Promise<number> {
    return this.#call(key, (n) => n.clear(key ?? null));
  }

  prune(): Promise<number> {
    return this.#call(undefined, (n) => n.prune());
  }

  async get(key: string): Promise<IdempotencyRecord | null> {
    const r = await this.#call(key, (n) => n.get(key));
    return r ? toRecord(r) : null;
  }

  async listRecords(options: ListOptions = {}): Promise<IdempotencyRecord[]> {
    const rows = await this.#call(undefined, (n) => n.listRecords(options.status ?? null, options.limit ?? null));
    return withoutKeyIdSecret(rows, options).map(toRecord);
  }

  /** See `Store.listRecent`: in the store's own query where its native half has one (SQLite, Postgres). */
  async listRecent(query: RecentQuery = {}): Promise<RecentRecords> {
    const n = await this.#use();
    if (n.listRecent === undefined) return listRecentFallback(this, query); // through listRecords, which leaves it out
    const out = await this.#call(undefined, (n) =>
      n.listRecent!({
        status: query.status,
        name: query.name,
        updatedSince: query.updatedSince,
        limit: query.limit,
        withResults: query.withResults === true,
      }),
    );
    const records = withoutKeyIdSecret(out.records, query);
    return { records: records.map(toRecord), matched: out.matched - (out.records.length - records.length) };
  }

  async stats(): Promise<StoreStats> {
    const s = await this.#call(undefined, (n) => n.stats());
    return { ...s, oldestPendingAt: s.oldestPendingAt ?? null, sizeBytes: s.sizeBytes ?? null };
  }

  /** @internal See `REPLAY_DERIVED`; always null for a store whose native half cannot peek (Redis, Postgres). */
  [REPLAY_DERIVED](name: string, contextJson: string | null, payloadJson: string): string | null {
    const n = this.#native;
    if (n === undefined || this.#closed || n.replayCall === undefined) return null;
    return n.replayCall(name, contextJson, payloadJson);
  }

  /** See `Store.peekReplay`; always null for a store whose native half cannot peek (Redis). */
  peekReplay(key: string, fingerprint: string): ReplayHit | null {
    const n = this.#native;
    if (n === undefined || this.#closed || n.peekReplay === undefined) return null;
    const r = n.peekReplay(key, fingerprint);
    if (!r) return null;
    return {
      result: r.result == null ? undefined : JSON.parse(r.result),
      error: r.error == null ? null : JSON.parse(r.error),
      attempts: r.attempts,
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    let n: NativeStore | undefined;
    try {
      n = this.#native ?? (await this.#opening);
    } catch {
      // never opened: nothing to close
    }
    await n?.close();
  }
}
