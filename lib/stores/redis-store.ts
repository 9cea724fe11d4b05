/**
 * The Redis (or Valkey) store, for many processes and hosts. Every record is one string
 * under `prefix` (see src/redis_store/record.rs); a new call claims it with a plain
 * `SET NX GET`, and complete, fail and renew are each one Lua script on one key, timed by
 * the server's clock. The connection is opened on first use and re-established after an
 * outage; nothing waits longer than the timeouts.
 *
 * The acquires, completes, fails and renewals made in one turn of the event loop cross
 * into Rust together, as one string (src/redis_store/ops.rs), and come back as one array:
 * one crossing, one pipeline, one promise per turn, and no object built field by field on
 * either side. Under Node, a plain redis:// server's connection runs on this thread's own
 * event loop (src/redis_store/on_loop/).
 */

import { asStoreError } from '../core/errors.js';
import * as native from '../core/native.js';
import { NativeBackedStore, type NativeStore } from './native-store.js';
import { checkAcquire, checkRenew, checkSettle } from './requests.js';
import { RECORDS_PLACE } from '../core/names.js';
import type { AcquireRequest, AcquireResult, IdempotencyRecord, RecordStatus, SettleRequest } from '../core/store.js';

export interface RedisStoreOptions {
  /** `redis://[user:password@]host:port/db`, or `rediss://` for TLS. Default `redis://127.0.0.1:6379`. */
  url?: string;
  /** Prefix of every record's Redis key. Default `idempotent-tools:`. */
  prefix?: string;
  /** How long to wait for a connection before failing with `StoreError`. Default 2000. */
  connectTimeoutMs?: number;
  /** How long to wait for one command's reply before failing with `StoreError`. Default 5000. */
  commandTimeoutMs?: number;
  /** `url` is one node of a Redis (or Valkey) Cluster: the other nodes are discovered from
   * it, each command goes to its key's primary, and MOVED/ASK redirects are followed.
   * Listing, stats and clear walk every primary. Default false. */
  cluster?: boolean;
}

const OPTIONS = new Set(['url', 'prefix', 'connectTimeoutMs', 'commandTimeoutMs', 'cluster']);

/** @internal See `RedisStore[EVICTION_CHECK]`. */
export const EVICTION_CHECK = Symbol.for('idempotent-tools.evictionCheck');

/** The servers (URLs, password hidden) whose eviction policy was warned of, once each. */
const evictionWarned = new Set<string>();

/** One op's answer from `runBatch` (see src/redis_store/ops.rs). */
type Reply = string | boolean | unknown[];

interface Job {
  key: string;
  answer(reply: Reply): void;
  fail(err: unknown): void;
}

/** The record an acquire found in the way, from its answer's fields. */
function recordOf(a: unknown[]): IdempotencyRecord {
  return {
    key: a[1] as string,
    name: a[2] as string,
    fingerprint: a[3] as string,
    status: a[4] as RecordStatus,
    result: a[5] == null ? undefined : JSON.parse(a[5] as string),
    error: a[6] == null ? null : JSON.parse(a[6] as string),
    attempts: a[7] as number,
    createdAt: a[8] as number,
    updatedAt: a[9] as number,
    expiresAt: (a[10] as number | null) ?? null,
    leaseExpiresAt: (a[11] as number | null) ?? null,
    meta: a[12] == null ? null : JSON.parse(a[12] as string),
    durationMs: (a[13] as number | null) ?? null,
  };
}

/** An answer that is the op's own failure (`[2, message]`), as the error to throw. */
function failureOf(reply: Reply, key: string): Error | undefined {
  return Array.isArray(reply) && reply[0] === 2 ? asStoreError(new Error(reply[1] as string), key) : undefined;
}

/**
 * A turn's calls, sent together at the end of the turn's check phase (`setImmediate`).
 * Not when the microtasks run out: a tool that awaits I/O resumes in a callback of its
 * own (an immediate, a socket's), and microtasks run after each such callback, so a
 * burst's settles would each go alone (measured: 64 calls in flight sent about 64
 * pipelines of one settle, bench/RESULTS.md, issue 30).
 */
class Calls {
  #ops: string[] = [];
  #jobs: Job[] = [];

  constructor(private readonly store: native.NativeRedisStore) {}

  #add(op: string, job: Job): void {
    this.#jobs.push(job);
    if (this.#ops.push(op) === 1) setImmediate(this.#flushNow);
  }

  readonly #flushNow = (): void => this.#flush();

  #flush(): void {
    const ops = this.#ops;
    const jobs = this.#jobs;
    this.#ops = [];
    this.#jobs = [];
    let sent: Promise<Reply[]>;
    try {
      sent = this.store.runBatch(ops.join('')) as Promise<Reply[]>;
    } catch (err) {
      for (const j of jobs) j.fail(asStoreError(err, j.key));
      return;
    }
    sent.then(
      (replies) => {
        jobs.forEach((job, i) => {
          const reply = replies[i];
          if (reply === undefined) job.fail(asStoreError(new Error('the native store answered a batch with fewer replies than calls'), job.key));
          else job.answer(reply);
        });
      },
      (err: unknown) => {
        for (const j of jobs) j.fail(asStoreError(err, j.key));
      },
    );
  }

  acquire(r: AcquireRequest): Promise<AcquireResult> {
    return new Promise((resolve, reject) => {
      // A request that cannot cross (a lone surrogate, a field of the wrong type, which
      // would break the string's framing) is refused here, alone (requests.ts); a throw in
      // this executor rejects this call's promise only.
      const meta = checkAcquire(r, 'RedisStore.acquire');
      const op =
        `a${r.leaseMs},${r.force ? 1 : 0},${r.key.length},${r.name.length},${r.fingerprint.length},${meta === undefined ? -1 : meta.length};` +
        `${r.key}${r.name}${r.fingerprint}${meta ?? ''}`;
      this.#add(op, {
        key: r.key,
        fail: reject,
        answer: (reply) => {
          if (typeof reply === 'string') return resolve({ acquired: true, token: reply, attempts: 1, takenOver: false });
          const failure = failureOf(reply, r.key);
          if (failure !== undefined) return reject(failure);
          const a = reply as unknown[];
          if (a[0] === 0) return resolve({ acquired: true, token: a[1] as string, attempts: a[2] as number, takenOver: a[3] as boolean });
          try {
            resolve({ acquired: false, record: recordOf(a) });
          } catch (err) {
            reject(err);
          }
        },
      });
    });
  }

  /** `complete` ('c') or `fail` ('f'). */
  settle(kind: 'c' | 'f', r: SettleRequest): Promise<boolean> {
    return new Promise((resolve, reject) => {
      checkSettle(r, kind === 'c' ? 'RedisStore.complete' : 'RedisStore.fail');
      const result = r.resultJson ?? undefined;
      const error = r.error == null ? undefined : JSON.stringify({ name: r.error.name, message: r.error.message });
      const op =
        `${kind}${r.ttlMs ?? ''},${r.durationMs ?? ''},${r.key.length},${r.token.length},${result === undefined ? -1 : result.length},${error === undefined ? -1 : error.length};` +
        `${r.key}${r.token}${result ?? ''}${error ?? ''}`;
      this.#add(op, { key: r.key, fail: reject, answer: (reply) => flag(reply, r.key, resolve, reject) });
    });
  }

  renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
      checkRenew(key, token, leaseMs, 'RedisStore.renew');
      this.#add(`r${leaseMs},${key.length},${token.length};${key}${token}`, {
        key,
        fail: reject,
        answer: (reply) => flag(reply, key, resolve, reject),
      });
    });
  }
}

function flag(reply: Reply, key: string, resolve: (b: boolean) => void, reject: (e: unknown) => void): void {
  if (typeof reply === 'boolean') resolve(reply);
  else reject(failureOf(reply, key) ?? asStoreError(new Error('an unexpected answer from the native store'), key));
}

export class RedisStore extends NativeBackedStore {
  /** The server's URL with any password replaced by `***`. */
  readonly path: string;
  /** The prefix of every record's Redis key (`idempotent-tools:` unless given). */
  readonly prefix: string;
  /** A turn's calls in one crossing; none on a cluster, where a batch would answer when
   * its slowest call does, and one node's trouble (a failover) must not hold up calls on
   * the other primaries: there every call crosses alone. */
  readonly #calls: Calls | undefined;
  readonly #raw: native.NativeRedisStore;
  #evictionCheck: Promise<string | null> | undefined;

  constructor(options: RedisStoreOptions = {}) {
    const checked = checkOptions(options);
    let raw: native.NativeRedisStore;
    try {
      // Under Node, a plain redis:// server's connection runs on this thread's own event
      // loop (no thread hop per call); elsewhere (Bun, Deno) the Tokio transport.
      raw = new native.NativeRedisStore({ ...checked, onLoop: underNode() });
    } catch (err) {
      throw new TypeError(`RedisStore: ${(err as Error).message}`);
    }
    super(async () => raw as NativeStore);
    this.path = raw.path;
    this.prefix = checked.prefix ?? DEFAULT_PREFIX;
    this.#place = redisPlace(checked.url, checked.prefix);
    this.#calls = checked.cluster ? undefined : new Calls(raw);
    this.#raw = raw;
  }

  /**
   * Once the first call's claim is answered, asks the server whether it may evict records
   * (`INFO memory`, on the connection the calls use): with a memory limit and a policy
   * other than `noeviction`, a full server drops keys, and a record dropped is a completed
   * call that runs again (every claim, and every record with `ttlMs`, carries an expiry:
   * the `volatile-*` policies' candidates too). Warns once per server; no call waits for it.
   */
  #checkEviction(): Promise<string | null> {
    let asked: Promise<native.EvictionPolicy | null>;
    try {
      asked = this.#raw.evictionPolicy();
    } catch {
      return Promise.resolve(null); // nobody awaits this: it must never reject
    }
    return asked.then(
      (p) => {
        if (p === null || !p.evicts) return null;
        const message =
          `idempotent-tools: the Redis server at ${this.path} evicts keys when it reaches its memory limit ` +
          `(maxmemory-policy ${p.policy}, maxmemory ${p.maxmemory} bytes): a record it evicts is a completed call that ` +
          'runs again, and an evicted claim lets a duplicate run beside its call. Set maxmemory-policy noeviction ' +
          '(a full server then fails calls with a StoreError instead), or keep the records on a Redis of their own.';
        if (!evictionWarned.has(this.path)) {
          evictionWarned.add(this.path);
          globalThis.process?.emitWarning?.(message, { type: 'IdempotentToolsWarning', code: 'IDEMPOTENT_TOOLS_REDIS_EVICTION' });
        }
        return message;
      },
      () => null, // a server that cannot say (no +info): the calls themselves report any outage
    );
  }

  /** @internal The first call's check of the eviction policy: the warning it gave, or null (tests await it). */
  get [EVICTION_CHECK](): Promise<string | null> | undefined {
    return this.#evictionCheck;
  }

  readonly #place: string;

  /** @internal */
  get [RECORDS_PLACE](): string {
    return this.#place;
  }

  override acquire(request: AcquireRequest): Promise<AcquireResult> {
    const claimed = this.#calls === undefined || this.closed ? super.acquire(request) : this.#calls.acquire(request);
    if (this.#evictionCheck === undefined) {
      const check = () => (this.closed ? null : this.#checkEviction());
      this.#evictionCheck = claimed.then(check, check);
    }
    return claimed;
  }

  override complete(request: SettleRequest): Promise<boolean> {
    return this.#calls === undefined || this.closed ? super.complete(request) : this.#calls.settle('c', request);
  }

  override fail(request: SettleRequest): Promise<boolean> {
    return this.#calls === undefined || this.closed ? super.fail(request) : this.#calls.settle('f', request);
  }

  override renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    return this.#calls === undefined || this.closed ? super.renew(key, token, leaseMs) : this.#calls.renew(key, token, leaseMs);
  }
}

/** The prefix of every record's Redis key when none is given. */
const DEFAULT_PREFIX = 'idempotent-tools:';

/**
 * @internal Where a RedisStore's records live (see RECORDS_PLACE), however its URL is
 * spelled: the scheme, the host (lowercased), the port (default 6379), the database
 * (default 0), the user and the prefix. `redis://127.0.0.1/10` and
 * `redis://127.0.0.1:6379/10` are one place. The password never takes part: it does not
 * say where records live, and a place may be printed.
 */
export function redisPlace(url: string, prefix: string | undefined): string {
  const keys = prefix ?? DEFAULT_PREFIX;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `redis:${url.replace(/\/\/[^@/]*@/, '//')}#${keys}`; // not a URL the store would open anyway
  }
  const scheme = parsed.protocol.replace(/:$/, '').toLowerCase();
  const host = decoded(parsed.hostname).toLowerCase();
  const port = parsed.port === '' ? 6379 : Number(parsed.port);
  const path = parsed.pathname.replace(/^\/+|\/+$/g, '');
  const db = path === '' ? 0 : /^\d+$/.test(path) ? Number(path) : path;
  const user = decoded(parsed.username);
  return `redis:${scheme}://${user === '' ? '' : `${user}@`}${host}:${port}/${db}#${keys}`;
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Whether this runtime is Node.js itself, whose libuv the native store may drive.
 * `IDEMPOTENT_TOOLS_REDIS_TRANSPORT=tokio` (internal: the tests and the fault harness run
 * every Redis case on both transports) keeps the Tokio transport under Node too.
 */
function underNode(): boolean {
  const g = globalThis as { Bun?: unknown; Deno?: unknown };
  if (typeof process === 'object' && process.env?.IDEMPOTENT_TOOLS_REDIS_TRANSPORT === 'tokio') return false;
  return typeof process === 'object' && typeof process.versions?.node === 'string' && g.Bun === undefined && g.Deno === undefined;
}

function checkOptions(options: RedisStoreOptions) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('RedisStore: options must be an object such as { url: "redis://127.0.0.1:6379" }');
  }
  for (const name of Object.keys(options)) {
    if (!OPTIONS.has(name)) {
      throw new TypeError(`RedisStore: unknown option "${name}"; the options are ${[...OPTIONS].join(', ')}`);
    }
  }
  const { url = 'redis://127.0.0.1:6379', prefix, connectTimeoutMs, commandTimeoutMs, cluster } = options;
  if (typeof url !== 'string' || !/^rediss?:\/\//.test(url)) {
    throw new TypeError('RedisStore: url must be a redis:// or rediss:// URL string');
  }
  if (prefix !== undefined && typeof prefix !== 'string') throw new TypeError('RedisStore: prefix must be a string');
  for (const [name, value] of [['connectTimeoutMs', connectTimeoutMs], ['commandTimeoutMs', commandTimeoutMs]] as const) {
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)) {
      throw new RangeError(`RedisStore: ${name} must be a finite number of milliseconds > 0`);
    }
  }
  if (cluster !== undefined && typeof cluster !== 'boolean') throw new TypeError('RedisStore: cluster must be true or false');
  return { url, prefix, connectTimeoutMs, commandTimeoutMs, cluster };
}
