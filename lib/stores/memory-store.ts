/**
 * `MemoryStore` (exported from `idempotent-tools/testing`): the store protocol held in
 * this process's memory, for unit tests of code that uses the package. It applies the
 * claim rule of `src/claim.rs` (a pending record never expires; `ttlMs` counts from the
 * settle), fences settles by token, and times leases on the monotonic clock; it passes
 * the conformance suite. Nothing survives the process: never use it for real side effects.
 */

import { randomBytes } from 'node:crypto';

import { StoreError } from '../core/errors.js';
import { withoutKeyIdSecret } from '../core/key-id.js';
import type {
  AcquireRequest,
  AcquireResult,
  IdempotencyRecord,
  ListOptions,
  RecordError,
  RecordMeta,
  RecordStatus,
  ReleaseOptions,
  SettleRequest,
  Store,
  StoreStats,
} from '../core/store.js';
import { releaseReconciles } from '../core/store.js';

interface Row {
  key: string;
  name: string;
  fingerprint: string;
  status: RecordStatus;
  /** The current claim's token (pending only). */
  token: string | null;
  /** The token of the claim that settled the record: a resent settle of it still succeeds. */
  settledToken: string | null;
  resultJson: string | undefined;
  error: RecordError | null;
  attempts: number;
  createdAt: number;
  updatedAt: number;
  expiresAt: number | null;
  /** When the lease runs out, on the monotonic clock (`performance.now()`). */
  leaseUntil: number | null;
  meta: RecordMeta | null;
  durationMs: number | null;
}

/** The records a MemoryStore and its handles share. */
type Records = Map<string, Row>;

const monotonic = () => performance.now();

/** The token of a released claim (see `release`): no claim has it. */
const RELEASED_TOKEN = '-'.repeat(32);

export interface MemoryStoreOptions {
  /** Share the records of another MemoryStore, as a second process opening the same store would. */
  sharedWith?: MemoryStore;
}

export class MemoryStore implements Store {
  readonly #rows: Records;
  #closed = false;
  /** A name for messages and `inspect`-style output. */
  readonly path = 'memory';

  constructor(options: MemoryStoreOptions = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('MemoryStore: options must be an object');
    for (const name of Object.keys(options)) {
      if (name !== 'sharedWith') throw new TypeError(`MemoryStore: unknown option "${name}"; the only option is sharedWith`);
    }
    if (options.sharedWith !== undefined && !(options.sharedWith instanceof MemoryStore)) {
      throw new TypeError('MemoryStore: sharedWith must be another MemoryStore');
    }
    const other = options.sharedWith;
    this.#rows = other === undefined ? new Map() : other.#rows;
  }

  get closed(): boolean {
    return this.#closed;
  }

  #open(): void {
    if (this.#closed) throw new StoreError('idempotent-tools: this MemoryStore is closed');
  }

  /** The key's row, unless it is a settled one past its expiry (then it counts as absent). */
  #live(key: string, now = Date.now()): Row | undefined {
    const row = this.#rows.get(key);
    if (row === undefined) return undefined;
    return row.status !== 'pending' && row.expiresAt !== null && row.expiresAt <= now ? undefined : row;
  }

  #view(row: Row): IdempotencyRecord {
    const now = Date.now();
    return {
      key: row.key,
      name: row.name,
      fingerprint: row.fingerprint,
      status: row.status,
      result: row.resultJson === undefined ? undefined : JSON.parse(row.resultJson),
      error: row.error === null ? null : { ...row.error },
      attempts: row.attempts,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
      expiresAt: row.expiresAt,
      // On the wall clock, never earlier than the monotonic deadline that decides: Date.now()
      // is whole milliseconds (up to 1 ms behind), so round up and add that millisecond.
      leaseExpiresAt: row.status === 'pending' && row.leaseUntil !== null ? Math.ceil(now + (row.leaseUntil - monotonic())) + 1 : null,
      meta: row.meta === null ? null : structuredClone(row.meta),
      durationMs: row.durationMs,
    };
  }

  async get(key: string): Promise<IdempotencyRecord | null> {
    this.#open();
    const row = this.#live(key);
    return row === undefined ? null : this.#view(row);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    this.#open();
    const now = Date.now();
    const found = this.#live(request.key, now);
    let attempts = 1;
    let takenOver = false;
    if (found !== undefined) {
      if (found.status !== 'failed') {
        if (found.status === 'completed' || found.fingerprint !== request.fingerprint) return { acquired: false, record: this.#view(found) };
        const alive = found.leaseUntil !== null && found.leaseUntil > monotonic();
        if (alive && !request.force) return { acquired: false, record: this.#view(found) };
        takenOver = !alive;
      }
      attempts = found.attempts + 1;
    }
    const token = randomBytes(16).toString('hex');
    this.#rows.set(request.key, {
      key: request.key,
      name: request.name,
      fingerprint: request.fingerprint,
      status: 'pending',
      token,
      settledToken: null,
      resultJson: undefined,
      error: null,
      attempts,
      createdAt: found?.createdAt ?? now,
      updatedAt: now,
      expiresAt: null,
      leaseUntil: monotonic() + Math.max(0, request.leaseMs),
      meta: request.meta === undefined ? null : structuredClone(request.meta),
      durationMs: null,
    });
    return { acquired: true, token, attempts, takenOver };
  }

  #settle(request: SettleRequest, status: 'completed' | 'failed'): boolean {
    this.#open();
    const row = this.#rows.get(request.key);
    if (row === undefined) return false;
    if (row.status !== 'pending' || row.token !== request.token) {
      // The same settle sent again (its reply lost) still succeeds; any other is refused.
      return (
        row.status === status &&
        row.settledToken === request.token &&
        row.resultJson === request.resultJson &&
        JSON.stringify(row.error) === JSON.stringify(request.error ?? null)
      );
    }
    const now = Date.now();
    Object.assign(row, {
      status,
      token: null,
      settledToken: request.token,
      resultJson: request.resultJson,
      error: request.error === undefined ? null : { name: request.error.name, message: request.error.message },
      updatedAt: now,
      expiresAt: request.ttlMs === undefined ? null : now + Math.ceil(request.ttlMs),
      leaseUntil: null,
      durationMs: request.durationMs === undefined ? null : Math.round(request.durationMs),
    });
    return true;
  }

  async complete(request: SettleRequest): Promise<boolean> {
    return this.#settle(request, 'completed');
  }

  async fail(request: SettleRequest): Promise<boolean> {
    return this.#settle(request, 'failed');
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    this.#open();
    const row = this.#rows.get(key);
    if (row === undefined || row.status !== 'pending' || row.token !== token) return false;
    row.leaseUntil = monotonic() + Math.max(0, leaseMs);
    return true;
  }

  async listRecords(options: ListOptions = {}): Promise<IdempotencyRecord[]> {
    this.#open();
    const now = Date.now();
    const rows = [...this.#rows.values()]
      .filter((r) => this.#live(r.key, now) !== undefined && (options.status === undefined || r.status === options.status))
      .sort((a, b) => a.createdAt - b.createdAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const listed = withoutKeyIdSecret(rows, options);
    return (options.limit === undefined ? listed : listed.slice(0, options.limit)).map((r) => this.#view(r));
  }

  async clear(key?: string): Promise<number> {
    this.#open();
    if (key !== undefined) return this.#rows.delete(key) ? 1 : 0;
    const n = this.#rows.size;
    this.#rows.clear();
    return n;
  }

  async release(key: string, options?: ReleaseOptions): Promise<boolean> {
    this.#open();
    const reconcile = releaseReconciles(options);
    const row = this.#rows.get(key);
    if (row === undefined || row.status !== 'pending') return false;
    // A token no claim has (claims are hex): the stuck owner's renew and settle are refused.
    if (reconcile) {
      // A claim nobody holds, its lease run out: the next acquire takes it over.
      Object.assign(row, { token: RELEASED_TOKEN, leaseUntil: monotonic(), updatedAt: Date.now() });
    } else {
      Object.assign(row, {
        status: 'failed',
        token: null,
        leaseUntil: null,
        updatedAt: Date.now(),
        error: { name: 'Released', message: 'released by an operator' },
      });
    }
    return true;
  }

  async expireSettled(keys: string[], expiresAt: number): Promise<number> {
    this.#open();
    let changed = 0;
    for (const key of keys) {
      const row = this.#rows.get(key);
      if (row === undefined || row.status === 'pending') continue;
      row.expiresAt = expiresAt;
      changed++;
    }
    return changed;
  }

  async prune(): Promise<number> {
    this.#open();
    const now = Date.now();
    let n = 0;
    for (const row of [...this.#rows.values()]) {
      if (this.#live(row.key, now) === undefined) {
        this.#rows.delete(row.key);
        n++;
      }
    }
    return n;
  }

  async stats(): Promise<StoreStats> {
    this.#open();
    const now = Date.now();
    const stats: StoreStats = { pending: 0, completed: 0, failed: 0, expired: 0, oldestPendingAt: null, sizeBytes: null };
    for (const row of this.#rows.values()) {
      if (this.#live(row.key, now) === undefined) {
        stats.expired++;
        continue;
      }
      stats[row.status]++;
      if (row.status === 'pending' && (stats.oldestPendingAt === null || row.createdAt < stats.oldestPendingAt)) {
        stats.oldestPendingAt = row.createdAt;
      }
    }
    return stats;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}
