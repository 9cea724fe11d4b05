/**
 * The PostgreSQL store, for teams that already run Postgres. Every record is one row of
 * one table; acquire, renew, complete, fail and release are each one atomic statement,
 * fenced by token and timed by the server's clock (the SQL is in src/postgres/sql/).
 * Settles of awaited claims send NOTIFY (with the claim's tag, never the key), so 'block'
 * waiters in other processes resume at once.
 */

import * as native from '../core/native.js';
import { type BatchingNativeStore, batched } from './batch.js';
import { NativeBackedStore } from './native-store.js';
import { RECORDS_PLACE } from '../core/names.js';
import { checkWellFormed } from '../core/exact-strings.js';
import { RefusedInputError } from '../core/refused-input.js';
import type { IdempotencyRecord } from '../core/store.js';

export interface PostgresStoreOptions {
  /** `postgres://[user[:password]@]host[:port]/database[?sslmode=require|verify-full…]`. Default `$DATABASE_URL`. */
  url?: string;
  /** The records' table, `name` or `schema.name`. Default `idempotent_tools_records`. */
  table?: string;
  /** Connections in the pool (concurrent statements are pipelined over them). Default 4. */
  poolSize?: number;
  /** How long to wait for a connection before failing with `StoreError`. Default 2000. */
  connectTimeoutMs?: number;
  /** How long to wait for one statement's reply before failing with `StoreError`. Default 5000. */
  commandTimeoutMs?: number;
  /** Create the table on first use when it is missing (default true). False for a role
   * that may not: the table then comes from `idempotent-tools --postgres URL migrate`. */
  createTable?: boolean;
  /**
   * How often, in ms, the store deletes expired rows by itself (settled rows past their
   * `ttlMs`; a pending one is never deleted): once when it is made, then every
   * `pruneIntervalMs`, at most 1000 rows a pass (sooner again while passes come back
   * full). 0: never by itself (`prune()` still does). Default 60000.
   */
  pruneIntervalMs?: number;
}

const OPTIONS = new Set(['url', 'table', 'poolSize', 'connectTimeoutMs', 'commandTimeoutMs', 'createTable', 'pruneIntervalMs']);
/**
 * Batch statements of one kind (claims, completions) outstanding at once. Measured with 64
 * new calls in flight (bench/RESULTS.md, "PostgreSQL"): 2 instead of no bound made batches
 * of 12 instead of 8 on average, cut the server's CPU per call by about a fifth and ours a
 * little, at the same throughput; 1 cut more CPU but makes a lone second call wait for
 * the first one's commit.
 */
const BATCHES_IN_FLIGHT = 2;
/** Rows one periodic pass deletes at most (PRUNE_BATCH in src/postgres/sql.rs). */
const PRUNE_BATCH = 1000;
/**
 * Full passes run back to back at most (10 million rows, as one `prune()`), then the
 * interval: a server (or a proxy in front of it) that always reports a full pass would
 * otherwise keep the store pruning without a pause for as long as it is open.
 */
const MAX_PASSES_BACK_TO_BACK = 10_000;

export class PostgresStore extends NativeBackedStore {
  /** The server's URL with any password replaced by `***`. */
  readonly path: string;
  /** The records' table, as given. */
  readonly table: string;
  readonly #pg: native.NativePostgresStore;
  readonly #watchers = new Map<string, Set<() => void>>();
  /**
   * The keys awaited in this process, by the tag of the claim each awaits (watch.sql): a
   * NOTIFY carries the tag, never the key, and wakes only that key's waiters.
   */
  readonly #keyOfTag = new Map<string, string>();
  readonly #tagsOfKey = new Map<string, Set<string>>();
  /** Which listening loop is current, 0 for none (a stopped loop's late replies are ignored). */
  #listening = 0;
  #loops = 0;
  /** Resolves once the current loop's LISTEN is in place. */
  #ready: Promise<void> | undefined;
  #pruneTimer: NodeJS.Timeout | undefined;

  constructor(options: PostgresStoreOptions = {}) {
    const { pruneIntervalMs, ...checked } = checkOptions(options);
    let store: native.NativePostgresStore;
    try {
      store = new native.NativePostgresStore(checked);
    } catch (err) {
      throw new TypeError(`PostgresStore: ${(err as Error).message}`);
    }
    // acquire and complete go to Rust in batches: the calls of one turn of the loop are one
    // statement, and one commit, on the server; while BATCHES_IN_FLIGHT of a kind are out,
    // more calls wait and go together.
    const raw = store as unknown as BatchingNativeStore;
    // Every call's strings are held to PostgreSQL's text (postgresText) before the call
    // joins a batch: one statement carries the batch, and a string it refuses would fail it.
    super(async () => batched(raw, BATCHES_IN_FLIGHT), postgresText);
    this.#pg = store;
    this.path = store.path;
    this.table = store.table;
    this.#place = postgresPlace({ connectionString: checked.url }, checked.table);
    if (pruneIntervalMs > 0) this.#prune(0, pruneIntervalMs);
  }

  readonly #place: string;

  /** @internal */
  get [RECORDS_PLACE](): string {
    return this.#place;
  }

  override get(key: string): Promise<IdempotencyRecord | null> {
    try {
      checkPostgresText(key);
    } catch (err) {
      return Promise.reject(err);
    }
    return super.get(key);
  }

  /**
   * Retention: one bounded pass of `prune` after `delay`, then the next: at once after a
   * full pass (up to MAX_PASSES_BACK_TO_BACK of them in a row), else after `interval`.
   * Best effort: a failed pass (the server down, a role that may not delete) waits for
   * the next interval, and never fails a call. The timer does not keep the process alive.
   */
  #prune(delay: number, interval: number, fullInARow = 0): void {
    if (this.closed) return;
    this.#pruneTimer = setTimeout(() => {
      this.#pg.pruneBatch().then(
        (n) => {
          const full = n >= PRUNE_BATCH ? fullInARow + 1 : 0;
          if (full > 0 && full < MAX_PASSES_BACK_TO_BACK) this.#prune(0, interval, full);
          else this.#prune(interval, interval);
        },
        () => this.#prune(interval, interval),
      );
    }, delay);
    this.#pruneTimer.unref();
  }

  /** Creates the table if it is missing (true), or checks the one there (false). */
  async migrate(): Promise<boolean> {
    await this.ready().catch(() => {});
    return this.#pg.migrate();
  }

  /**
   * The wake-up hook of `onDuplicate: 'block'` (see wakeups.ts): `onSettled` runs when
   * `key`'s record is settled in any process, or when a settle may have been missed.
   * Once this store LISTENs, the key's pending claim is marked as awaited (`watch.sql`),
   * so that its settle sends NOTIFY (settles nobody awaits send none: NOTIFY serialises
   * commits server-wide); the mark answers with the claim's tag, which that NOTIFY carries
   * instead of the key. A key that was no longer pending when marked is looked at again
   * at once. Returns the unsubscribe.
   */
  watchSettles(key: string, onSettled: () => void): () => void {
    let set = this.#watchers.get(key);
    if (set === undefined) this.#watchers.set(key, (set = new Set()));
    set.add(onSettled);
    if ((this.#listening === 0 || this.#ready === undefined) && !this.closed) this.#ready = this.#listen();
    let active = true;
    void this.#ready?.then(() => (active ? this.#pg.watch(key) : undefined)).then(
      (tag) => {
        if (!active || tag === undefined) return;
        if (tag === null) return onSettled(); // not pending (any more): look again now
        this.#tag(key, tag);
      },
      () => active && onSettled(), // could not mark it: look again now, then poll
    );
    return () => {
      active = false;
      set.delete(onSettled);
      if (set.size === 0 && this.#watchers.get(key) === set) {
        this.#watchers.delete(key);
        this.#untag(key);
      }
      if (this.#watchers.size === 0 && this.#listening !== 0) {
        this.#listening = 0;
        this.#ready = undefined;
        this.#pg.stopListening();
      }
    };
  }

  /** `key` is awaited under the claim `tag` (a takeover gives the key a new claim, and a new tag). */
  #tag(key: string, tag: string): void {
    if (!this.#watchers.has(key)) return; // every waiter of the key left meanwhile
    this.#keyOfTag.set(tag, key);
    let tags = this.#tagsOfKey.get(key);
    if (tags === undefined) this.#tagsOfKey.set(key, (tags = new Set()));
    tags.add(tag);
  }

  #untag(key: string): void {
    for (const tag of this.#tagsOfKey.get(key) ?? []) this.#keyOfTag.delete(tag);
    this.#tagsOfKey.delete(key);
  }

  /** Starts a listening loop; resolves once its LISTEN is in place. */
  #listen(): Promise<void> {
    const loop = (this.#listening = ++this.#loops);
    let began!: () => void;
    const ready = new Promise<void>((resolve) => (began = resolve));
    void (async () => {
      let first = true;
      for (;;) {
        let tags: string[] | null;
        try {
          tags = await this.#pg.nextSettled();
        } catch {
          tags = null; // the store closed under us: the waiters fall back to polling
        }
        if (tags === null || this.#listening !== loop) return;
        for (const tag of tags) {
          if (tag === '' && first) {
            first = false;
            began();
            continue;
          }
          // '' after a reconnect: a NOTIFY may have been missed, everyone looks again.
          // Otherwise only the waiters of the claim the tag names (none: another process's).
          const key = tag === '' ? undefined : this.#keyOfTag.get(tag);
          const wake = tag === '' ? [...this.#watchers.values()].flatMap((s) => [...s]) : key === undefined ? [] : [...(this.#watchers.get(key) ?? [])];
          for (const w of wake) w();
        }
      }
    })();
    return ready;
  }

  override async close(): Promise<void> {
    clearTimeout(this.#pruneTimer);
    this.#listening = 0;
    this.#ready = undefined;
    this.#pg.stopListening();
    await super.close();
  }
}

function checkOptions(options: PostgresStoreOptions) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('PostgresStore: options must be an object such as { url: "postgres://user@host/db" }');
  }
  for (const name of Object.keys(options)) {
    if (!OPTIONS.has(name)) {
      throw new TypeError(`PostgresStore: unknown option "${name}"; the options are ${[...OPTIONS].join(', ')}`);
    }
  }
  const { url = process.env.DATABASE_URL, table, poolSize, connectTimeoutMs, commandTimeoutMs, createTable, pruneIntervalMs = 60_000 } = options;
  if (url === undefined || url === '') {
    throw new TypeError('PostgresStore: no url given and DATABASE_URL is not set; pass { url: "postgres://user@host:5432/db" }');
  }
  if (typeof url !== 'string' || !/^postgres(ql)?:\/\//i.test(url)) {
    throw new TypeError('PostgresStore: url must be a postgres:// or postgresql:// URL string');
  }
  if (table !== undefined && typeof table !== 'string') throw new TypeError('PostgresStore: table must be a string such as "idempotent_tools_records" or "app.calls"');
  if (poolSize !== undefined && (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 64)) {
    throw new RangeError('PostgresStore: poolSize must be an integer from 1 to 64');
  }
  for (const [name, value] of [['connectTimeoutMs', connectTimeoutMs], ['commandTimeoutMs', commandTimeoutMs]] as const) {
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)) {
      throw new RangeError(`PostgresStore: ${name} must be a finite number of milliseconds > 0`);
    }
  }
  if (createTable !== undefined && typeof createTable !== 'boolean') throw new TypeError('PostgresStore: createTable must be a boolean');
  if (typeof pruneIntervalMs !== 'number' || !Number.isFinite(pruneIntervalMs) || pruneIntervalMs < 0) {
    throw new RangeError(`PostgresStore: pruneIntervalMs must be a finite number of milliseconds >= 0 (0: never by itself), not ${String(pruneIntervalMs)}`);
  }
  return { url, table, poolSize, connectTimeoutMs, commandTimeoutMs, createTable, pruneIntervalMs };
}

/** What locates a database: pg's Pool options, or a connection string. */
interface PgLocation {
  connectionString?: string;
  host?: string;
  port?: number | string;
  database?: string;
  user?: string;
}

/**
 * @internal Where records of `table` on that database physically live, for the
 * one-name-one-function rule (see names.ts): `postgres:<host>:<port>/<database>#<table>`,
 * with node-postgres's defaults for what is not given. Shared by PostgresStore and
 * idempotentTx, whose records share one table.
 */
export function postgresPlace(where: PgLocation, table: string | undefined): string {
  let { host, port, database, user } = where;
  if (where.connectionString) {
    try {
      const url = new URL(where.connectionString);
      host = decodeURIComponent(url.hostname) || url.searchParams.get('host') || host;
      port = url.port || port;
      database = decodeURIComponent(url.pathname.replace(/^\//, '')) || database;
      user = decodeURIComponent(url.username) || user;
    } catch {
      return `postgres:${where.connectionString}#${table ?? ''}`;
    }
  }
  const env = process.env;
  host ||= env.PGHOST || 'localhost';
  port ||= env.PGPORT || 5432;
  user ||= env.PGUSER || env.USER;
  database ||= env.PGDATABASE || user;
  let quoted: string;
  try {
    quoted = native.postgresSql(table ?? null).table;
  } catch {
    quoted = table ?? '';
  }
  return `postgres:${host}:${port}/${database}#${quoted}`;
}

/**
 * The longest key PostgreSQL's b-tree index on `key` holds, in UTF-8 bytes (an index entry
 * must fit in a third of an 8 kB page, about 2,700 bytes; this leaves room for the
 * entry's own overhead). SQLite and Redis have no such limit.
 */
export const POSTGRES_MAX_KEY_BYTES = 2048;

/** How messages name the strings of a request (see postgresText). */
const FIELDS: Record<string, string> = {
  key: 'key',
  name: 'name',
  fingerprint: 'fingerprint',
  token: "claim's token",
  resultJson: 'JSON text of the result',
};

/**
 * @internal PostgreSQL's rule for the strings of a call's request (a `TextRule`, see
 * requests.ts), refused before anything runs, as bad input (a `TypeError`, never the
 * `StoreError` that callers retry): U+0000 in any of them (PostgreSQL text cannot hold it),
 * and a key longer than POSTGRES_MAX_KEY_BYTES.
 */
export function postgresText(value: string, field: string, where: string): void {
  if (value.includes('\0')) {
    const what = FIELDS[field] ?? `"${field}"`;
    const shown = field === 'key' || field === 'name' ? ` ${JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value)}` : '';
    throw new RefusedInputError(
      `idempotent-tools: ${where}: the ${what}${shown} contains the character U+0000, which PostgreSQL text cannot hold ` +
        '(SQLite and Redis can); use another ' +
        (field === 'key' ? 'key (a derived key, or one without U+0000)' : field === 'name' ? 'name' : 'value, without U+0000'),
    );
  }
  if (field === 'key') {
    const bytes = value.length * 3 > POSTGRES_MAX_KEY_BYTES ? Buffer.byteLength(value, 'utf8') : 0;
    if (bytes > POSTGRES_MAX_KEY_BYTES) {
      throw new RefusedInputError(
        `idempotent-tools: ${where}: the key ${JSON.stringify(`${value.slice(0, 40)}...`)} is ${bytes} bytes long; PostgreSQL's ` +
          `index holds keys of at most ${POSTGRES_MAX_KEY_BYTES} bytes (UTF-8). Use a shorter key (a hash of it, say)`,
      );
    }
  }
}

/**
 * @internal What PostgreSQL text cannot hold in a key and a name (postgresText), and a
 * lone UTF-16 surrogate (it would arrive as U+FFFD, and two keys would become one).
 * Shared by PostgresStore's reads and idempotentTx.
 */
export function checkPostgresText(key: string, name?: string): void {
  checkWellFormed(key, 'key', 'PostgreSQL');
  postgresText(key, 'key', 'PostgreSQL');
  if (typeof name === 'string') {
    checkWellFormed(name, 'name', 'PostgreSQL');
    postgresText(name, 'name', 'PostgreSQL');
  }
}
