/** The embedded store: one SQLite file, safe for many calls, threads and processes on one host. */

import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

import { NativeSqliteStore } from '../core/native.js';
import { type BatchingNativeStore, batched } from './batch.js';
import { NativeBackedStore } from './native-store.js';
import { RECORDS_PLACE } from '../core/names.js';

export interface SqliteStoreOptions {
  /** The store file. Default: `IDEMPOTENT_TOOLS_DB`, else `~/.idempotent_tools/store.db`. */
  path?: string;
  /**
   * `'full'` (default): every commit is fsynced before the call's promise resolves, so a
   * result once seen survives even a power cut. `'normal'`: survives a process crash,
   * but a power cut or OS crash can lose the last completions (their calls would run
   * again). Concurrent calls share one commit either way.
   */
  durability?: 'full' | 'normal';
  /** How long a write waits for another process's lock before failing. Default 5000. */
  busyTimeoutMs?: number;
  /**
   * The project whose records this store reads and writes (default `''`). Records of
   * different namespaces never meet, though they share the file. `defaultStore()` uses
   * the current project's (see `projectNamespace()`).
   */
  namespace?: string;
  /**
   * Every project's records, for inspection (the CLI on a `--db` file): reads, `clear`
   * and `release` see them all, and each record says its `namespace`; calls are refused.
   */
  allNamespaces?: boolean;
  /**
   * How often, in ms, the store deletes expired records while it is open (settled records
   * past their `ttlMs`; a pending one is never deleted). It also does when it opens. Each
   * pass deletes at most 1000 records, in a transaction of its own. Default 60000.
   */
  pruneIntervalMs?: number;
}

/** A UTF-16 surrogate without its pair (with the `u` flag, a pair is one code point). */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

const OPTIONS = new Set(['path', 'durability', 'busyTimeoutMs', 'namespace', 'allNamespaces', 'pruneIntervalMs']);

export function defaultStorePath(): string {
  return process.env.IDEMPOTENT_TOOLS_DB || join(homedir(), '.idempotent_tools', 'store.db');
}

export class SqliteStore extends NativeBackedStore {
  /** The absolute path of the store file. */
  readonly path: string;
  readonly durability: 'full' | 'normal';
  /** The project whose records this store keeps; null when opened with `allNamespaces`. */
  readonly namespace: string | null;

  constructor(options: SqliteStoreOptions = {}) {
    const checked = checkOptions(options);
    // acquire and complete go to the writer a turn of the loop at a time: one crossing and
    // one writer job for the turn's calls, committed together (see batch.ts, src/sqlite/batch.rs).
    super(async () => batched((await NativeSqliteStore.open(checked)) as unknown as BatchingNativeStore, Infinity, 'turn'));
    this.path = checked.path;
    this.durability = checked.durability;
    this.namespace = checked.allNamespaces ? null : checked.namespace;
  }

  /** @internal */
  get [RECORDS_PLACE](): string {
    return sqlitePlace(this.path, this.namespace);
  }
}

/** @internal Where a SQLite store's records live (see RECORDS_PLACE): its file (absolute) and project. */
export function sqlitePlace(path: string, namespace: string | null): string {
  return `sqlite:${resolve(path)}#${namespace ?? '*'}`;
}

function checkOptions(options: SqliteStoreOptions) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('SqliteStore: options must be an object such as { path: "./store.db" }');
  }
  for (const name of Object.keys(options)) {
    if (!OPTIONS.has(name)) {
      throw new TypeError(`SqliteStore: unknown option "${name}"; the options are ${[...OPTIONS].join(', ')}`);
    }
  }
  const { path = defaultStorePath(), durability = 'full', busyTimeoutMs = 5000, namespace = '', allNamespaces = false, pruneIntervalMs = 60_000 } = options;
  if (typeof path !== 'string' || path.length === 0 || path.includes('\0')) {
    throw new TypeError('SqliteStore: path must be a non-empty file path string');
  }
  if (path === ':memory:' || path.startsWith('file:')) {
    // SQLite's in-memory database is one per connection, and the store's writer and
    // readers are several connections: each would see its own, and calls would run twice.
    // A "file:" URI is not parsed here, so it would become a file of that name.
    throw new TypeError(
      `SqliteStore: path ${JSON.stringify(path)} is not a file path; the store keeps its records in a file that its ` +
        'connections (and other processes) share. For tests, use MemoryStore from "idempotent-tools/testing", ' +
        'or a file in a temp folder',
    );
  }
  if (LONE_SURROGATE.test(path)) {
    // The native side gets UTF-8, where a lone surrogate would become U+FFFD: two different
    // paths would open one file.
    throw new TypeError('SqliteStore: path must not contain lone UTF-16 surrogates (they cannot be passed on exactly)');
  }
  if (durability !== 'full' && durability !== 'normal') {
    throw new TypeError(`SqliteStore: durability must be 'full' or 'normal', not ${JSON.stringify(durability)}`);
  }
  if (typeof busyTimeoutMs !== 'number' || !Number.isFinite(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new RangeError(`SqliteStore: busyTimeoutMs must be a finite number >= 0, not ${String(busyTimeoutMs)}`);
  }
  if (typeof namespace !== 'string') {
    throw new TypeError(`SqliteStore: namespace must be a string (a project name), not ${typeof namespace}`);
  }
  if (LONE_SURROGATE.test(namespace)) {
    throw new TypeError('SqliteStore: namespace must not contain lone UTF-16 surrogates (they cannot be stored exactly)');
  }
  if (typeof pruneIntervalMs !== 'number' || !Number.isFinite(pruneIntervalMs) || pruneIntervalMs < 1) {
    throw new RangeError(`SqliteStore: pruneIntervalMs must be a finite number of milliseconds >= 1, not ${String(pruneIntervalMs)}`);
  }
  if (typeof allNamespaces !== 'boolean') {
    throw new TypeError('SqliteStore: allNamespaces must be a boolean');
  }
  if (allNamespaces && options.namespace !== undefined) {
    throw new TypeError('SqliteStore: give namespace or allNamespaces, not both');
  }
  return { path: resolve(path), durability, busyTimeoutMs, namespace, allNamespaces, pruneIntervalMs } as const;
}

