/**
 * The store interface. Every store, built in or written by a user, implements it; the
 * wrapper (`idempotent.ts`) holds no store-specific code. `acquire` must be one atomic
 * step: callers racing on one key, in one process or many, get exactly one winner.
 */

import { UnstorableResultError } from './errors.js';

export type RecordStatus = 'pending' | 'completed' | 'failed';

export interface RecordError {
  name: string;
  message: string;
}

/** One key's record, as `get` and `listRecords` return it. Times are epoch ms. */
export interface IdempotencyRecord {
  key: string;
  name: string;
  status: RecordStatus;
  /** The stored result, parsed (a fresh copy on every read); `undefined` if `fn` returned it. */
  result: unknown;
  /** For `failed`: the thrown error's name and message. For `completed`: set only when
   * the result could not be stored (then replays throw a `TypeError` with this message). */
  error: RecordError | null;
  attempts: number;
  createdAt: number;
  updatedAt: number;
  expiresAt: number | null;
  /** SHA-256 of the function's name and arguments: a key reused for other arguments is refused. */
  fingerprint: string;
  /** While `pending`: when the owner's claim runs out unless renewed. */
  leaseExpiresAt: number | null;
  /** Where the call came from (scope, tool call id, framework, project), as the claim
   * recorded it; null for records written before stores kept it. */
  meta: RecordMeta | null;
  /** How long the executing call took (from its claim to its settle), in ms; null while
   * pending and for records written before stores kept it. */
  durationMs: number | null;
  /** The project (namespace) the record belongs to, for stores that keep one (SQLite); '' for none. */
  namespace?: string;
}

/** What a record knows about where its call came from (all optional; shown by `inspect` and `ui`). */
export interface RecordMeta {
  /** The project (namespace) the call ran in. */
  project?: string;
  /** The thread, conversation or run, as a display string. */
  scope?: string;
  /** The framework's id of the tool call. */
  toolCallId?: string;
  /** Which framework helper made the call ('langgraph', 'ai-sdk', 'openai-agents', 'mastra', 'mcp'). */
  framework?: string;
  /** Opt-in, redacted and capped preview of the arguments. */
  argsPreview?: string;
}

export interface AcquireRequest {
  key: string;
  name: string;
  fingerprint: string;
  leaseMs: number;
  ttlMs?: number;
  /** `onDuplicate: 'retry'`: claim even a pending record whose lease is alive. */
  force: boolean;
  /** Kept with the record as given (a store stores it as JSON text and gives it back parsed). */
  meta?: RecordMeta;
}

export type AcquireResult =
  | { acquired: true; token: string; attempts: number; takenOver: boolean }
  | { acquired: false; record: IdempotencyRecord };

export interface SettleRequest {
  key: string;
  /** The fencing token `acquire` returned; a settle under any other token is refused. */
  token: string;
  /** The result as canonical JSON text; absent when `fn` returned `undefined`. */
  resultJson?: string;
  error?: RecordError;
  ttlMs?: number;
  /** How long the executing call took, in ms (kept with the record). */
  durationMs?: number;
}

/** What `release` does with the record (see `Store.release`). */
export interface ReleaseOptions {
  /** Default true: a claim nobody holds, taken over by the next call (which asks `reconcile`).
   * False: `failed`, so the next call runs `fn`. */
  reconcile?: boolean;
}

/** `release`'s options checked (a typo must not free a record the other way): whether it reconciles. */
export function releaseReconciles(options: ReleaseOptions | undefined): boolean {
  if (options === undefined) return true;
  if (options === null || typeof options !== 'object') throw new TypeError('release(key, options): options must be an object such as { reconcile: false }');
  for (const name of Object.keys(options)) {
    if (name !== 'reconcile') throw new TypeError(`release(key, options): unknown option "${name}"; the only option is reconcile`);
  }
  if (options.reconcile !== undefined && typeof options.reconcile !== 'boolean') {
    throw new TypeError(`release(key, options): reconcile must be true or false, not ${JSON.stringify(options.reconcile)}`);
  }
  return options.reconcile ?? true;
}

export interface ListOptions {
  status?: RecordStatus;
  limit?: number;
}

/** What `listRecent` asks for: filters a store applies in its own query. */
export interface RecentQuery {
  status?: RecordStatus;
  /** The function's name, exactly. */
  name?: string;
  /** Only records updated (claimed or settled) at or after this, epoch ms. */
  updatedSince?: number;
  /** At most this many records (the newest). */
  limit?: number;
  /** Default false: records come without their results (`result` undefined). */
  withResults?: boolean;
}

/** What `listRecent` returns: the records, and how many matched before `limit`. */
export interface RecentRecords {
  records: IdempotencyRecord[];
  matched: number;
}

export interface StoreStats {
  pending: number;
  completed: number;
  failed: number;
  expired: number;
  oldestPendingAt: number | null;
  sizeBytes: number | null;
}

export interface Store {
  /** The key's record, or null when there is none or it has expired. */
  get(key: string): Promise<IdempotencyRecord | null>;
  /** Atomically claims the key (see the claim table in the README), or returns the record in the way. */
  acquire(request: AcquireRequest): Promise<AcquireResult>;
  /** Marks the claim `completed`; false if `token` no longer holds the record. */
  complete(request: SettleRequest): Promise<boolean>;
  /** Marks the claim `failed`; false if `token` no longer holds the record. */
  fail(request: SettleRequest): Promise<boolean>;
  /** Extends the claim's lease; false if `token` no longer holds the record. Optional:
   * without it the wrapper cannot renew, so `leaseMs` must outlast every call. */
  renew?(key: string, token: string, leaseMs: number): Promise<boolean>;
  listRecords(options?: ListOptions): Promise<IdempotencyRecord[]>;
  /** Deletes one record, or all; returns how many. */
  clear(key?: string): Promise<number>;
  close(): Promise<void>;
  /** Optional, the replay fast path: the stored outcome of `key`'s record if it is
   * completed, unexpired and made with `fingerprint`, read synchronously and without
   * waiting on anything (a lock, the network); null for anything else, and then the
   * wrapper's `acquire` decides (and reports a fingerprint mismatch). */
  peekReplay?(key: string, fingerprint: string): ReplayHit | null;
  /**
   * Optional (CLI `release`, the inspector page): frees a stuck pending record; false when
   * there is none, or it is not pending. Its token is replaced by one no claim can have,
   * so the stuck owner, if it still runs, can no longer renew or settle it (fenced). By
   * default (`reconcile` true) the record stays pending with its lease run out, a claim
   * nobody holds: the next call takes it over as it takes over a dead owner's
   * (`attempts` + 1, `takenOver`, and the wrapper asks `reconcile`), because the released
   * attempt may have had its side effect. `{ reconcile: false }`: the record becomes
   * `failed`, and the next call runs `fn` without asking.
   */
  release?(key: string, options?: ReleaseOptions): Promise<boolean>;
  /**
   * Optional (steps' expiry): gives the settled (`completed` or `failed`) records among
   * `keys` the expiry `expiresAt` (epoch ms, on the store's clock, as records' times are);
   * a pending record is left alone (it never expires while unresolved), and so is a key
   * without a record. Returns how many records changed. The wrapper calls it once a call
   * with `ttlMs` has completed, with the keys of the steps that call ran or replayed and
   * the call record's own `expiresAt`, so that its steps expire with it. Without it, step
   * records are kept until cleared.
   */
  expireSettled?(keys: string[], expiresAt: number): Promise<number>;
  /** Optional (CLI `prune`): deletes expired records; returns how many. */
  prune?(): Promise<number>;
  /** Optional (CLI `stats`). */
  stats?(): Promise<StoreStats>;
  /** Optional (the inspector page, `inspect`): the unexpired records that match, newest
   * change first (ties by key), filtered in the store's own query, without results unless
   * asked. Without it, the callers filter what `listRecords` gives. */
  listRecent?(query: RecentQuery): Promise<RecentRecords>;
}

/**
 * @internal A store whose claim is a row lock held by the call's own transaction until it
 * settles (idempotentTx): no other caller can take the claim over, however late its reply
 * came, so a late claim may still run fn (see lease.ts, `mayStart`).
 */
export const CLAIMS_LOCKED = Symbol.for('idempotent-tools.claimsLocked');

/** What `peekReplay` returns: a completed record's outcome. */
export interface ReplayHit {
  result: unknown;
  error: RecordError | null;
  attempts: number;
}

/**
 * @internal The replay fast path of a call under a derived key, in one synchronous step:
 * `(name, contextJson, payloadJson)` hashed into the call's key and fingerprint and its
 * completed record read together, answered with what `replayedAnswer` turns into the
 * replay (null: not a replay that can be read now; the wrapper goes on as usual). Only a
 * store whose native half can read without waiting (SQLite) has it.
 */
export const REPLAY_DERIVED = Symbol.for('idempotent-tools.replayDerived');
export type ReplayDerived = (name: string, contextJson: string | null, payloadJson: string) => string | null;

/**
 * A replay from `REPLAY_DERIVED`'s answer: `r` and the result's JSON text, `u` for a
 * result that was `undefined`, `e` and the error of a result that could not be stored
 * (thrown as the TypeError a replay of it throws). Kept here, with the interface it
 * extends, so that the call protocol reads it without knowing which store gave it.
 */
export function replayedAnswer(answer: string): unknown {
  switch (answer.charCodeAt(0)) {
    case 0x72: // r
      return JSON.parse(answer.slice(1));
    case 0x75: // u
      return undefined;
    default:
      // The key was derived and read in one native call: the error names none (error.key is unset).
      throw new UnstorableResultError((JSON.parse(answer.slice(1)) as RecordError).message);
  }
}

