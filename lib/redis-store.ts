/**
 * The Redis (or Valkey) store, for many processes and hosts. Every record is one Redis
 * hash under `prefix`; acquire, renew, complete and fail are each one Lua script on one
 * key, timed by the server's clock. The connection is opened on first use and
 * re-established after an outage; nothing waits longer than the timeouts.
 */

import { batched } from './batch.js';
import * as native from './native.js';
import { NativeBackedStore, type NativeStore } from './native-store.js';
import { RECORDS_PLACE } from './names.js';

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

export class RedisStore extends NativeBackedStore {
  /** The server's URL with any password replaced by `***`. */
  readonly path: string;

  constructor(options: RedisStoreOptions = {}) {
    const checked = checkOptions(options);
    let store: NativeStore;
    try {
      // On one server, acquire and complete go to Rust in batches: one crossing per turn of
      // the loop. Not on a cluster: a batch answers when its slowest call does, and there
      // one node's trouble (a failover) must not hold up calls on the other primaries.
      // Under Node.js, a plain redis:// server's connection runs on this thread's own
      // event loop (no thread hop per call); elsewhere (Bun, Deno) the Tokio transport.
      const raw = new native.NativeRedisStore({ ...checked, onLoop: underNode() });
      store = checked.cluster ? raw : batched(raw);
    } catch (err) {
      throw new TypeError(`RedisStore: ${(err as Error).message}`);
    }
    super(async () => store);
    this.path = store.path;
    this.#place = `redis:${checked.url}#${checked.prefix ?? 'idempotent-tools:'}`;
  }

  readonly #place: string;

  /** @internal */
  get [RECORDS_PLACE](): string {
    return this.#place;
  }
}

/** Whether this runtime is Node.js itself, whose libuv the native store may drive. */
function underNode(): boolean {
  const g = globalThis as { Bun?: unknown; Deno?: unknown };
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
