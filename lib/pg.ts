/**
 * `idempotent-tools/pg`: exactly once for side effects that are writes to the same
 * PostgreSQL database. `idempotentTx(fn, { pool })` runs `fn(client, ...args)` inside
 * BEGIN … COMMIT on a client of the user's node-postgres pool, and writes the claim and
 * the completion through that same client, in that same transaction: the record commits
 * exactly when `fn`'s writes do. A crash anywhere before COMMIT leaves neither.
 *
 * The call protocol is `idempotent()`'s (keys, fingerprints, replays, events); this file
 * only supplies a store whose acquire opens the transaction and whose complete commits
 * it. The SQL is PostgresStore's, from the Rust core (`postgresSql()`), so both modes
 * apply one claim rule to one table.
 *
 * Isolation: the statements are written for READ COMMITTED (the default). Under
 * REPEATABLE READ or SERIALIZABLE (a pool whose sessions default to it), a duplicate
 * that waited on the first call's row fails with a serialization error (SQLSTATE 40001)
 * instead of replaying; retry the call. Replays read with one plain SELECT, outside any
 * transaction.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';

import { StoreError } from './errors.js';
import { type IdempotentFunction, idempotent } from './idempotent.js';
import * as native from './native.js';
import { toRecord } from './native-store.js';
import type { IdempotentOptions } from './options.js';
import type { AcquireRequest, AcquireResult, IdempotencyRecord, ListOptions, SettleRequest, Store } from './store.js';

/** What idempotentTx needs of a node-postgres client (pg's PoolClient). */
export interface TxClient {
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
  release(err?: Error | boolean): void;
}

/** What idempotentTx needs of a node-postgres pool (pg's Pool). */
export interface TxPool<C extends TxClient = TxClient> {
  connect(): Promise<C>;
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
}

export interface IdempotentTxOptions<P extends TxPool, A extends unknown[]> extends Omit<IdempotentOptions<A>, 'store'> {
  /** The node-postgres pool whose clients run `fn` (pg's `Pool`, or what drizzle/kysely wrap). */
  pool: P;
  /** The records' table (PostgresStore's `table`), `name` or `schema.name`. Default `idempotent_tools_records`. */
  table?: string;
}

type ClientOf<P> = P extends TxPool<infer C> ? C : TxClient;

/** One call's transaction, found by the store's methods through AsyncLocalStorage. */
interface TxCall {
  client: TxClient | undefined;
  /** COMMIT failed: nothing was recorded, and fn's writes were rolled back. */
  commitFailed?: unknown;
}

const calls = new AsyncLocalStorage<TxCall>();

/** The claim rule says a duplicate is in flight: the first call's transaction holds the row. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Wraps `fn(client, ...args)` so that it runs once per key, inside one transaction with
 * its record. Returns a function of `...args` (the client is supplied), with `withKey`
 * and `keyFor` as `idempotent()`'s. `onDuplicate` for a call whose key another
 * transaction holds: `'raise'` throws `DuplicateInFlightError` at once; `'block'` (and
 * `'retry'`, which cannot run beside an uncommitted claim) waits on that transaction's row
 * lock up to `pollTimeoutMs`, then replays its result or runs if it rolled back.
 */
export function idempotentTx<P extends TxPool, A extends unknown[], R>(
  fn: (client: ClientOf<P>, ...args: A) => R,
  options: IdempotentTxOptions<P, A>,
): IdempotentFunction<A, R> {
  if (options === null || typeof options !== 'object' || options.pool === null || typeof options.pool?.connect !== 'function') {
    throw new TypeError('idempotentTx: options.pool must be a node-postgres Pool (new pg.Pool({ connectionString }))');
  }
  if (typeof fn !== 'function') throw new TypeError('idempotentTx: fn must be a function (client, ...args) => result');
  const { pool, table, ...rest } = options;
  if (table !== undefined && typeof table !== 'string') throw new TypeError('idempotentTx: table must be a string');
  let sql: native.PostgresSql;
  try {
    sql = native.postgresSql(table ?? null);
  } catch (err) {
    throw new TypeError(`idempotentTx: ${(err as Error).message}`);
  }
  const store = new TxStore(pool, sql, rest.onDuplicate ?? 'raise', rest.pollTimeoutMs ?? 30000);
  const name = rest.name ?? fn.name;
  // Named as fn (an anonymous fn without a name is idempotent()'s TypeError).
  const inTx = {
    [name]: (...args: A) => {
      const call = calls.getStore();
      if (call?.client === undefined) throw new Error('idempotentTx: internal error: no transaction for this call');
      return fn(call.client as ClientOf<P>, ...args);
    },
  }[name];
  const wrapped = idempotent(inTx, { ...rest, store } as IdempotentOptions<A>);
  const run = (call: (...args: A) => Promise<Awaited<R>>) => (...args: A): Promise<Awaited<R>> => {
    const tx: TxCall = { client: undefined };
    return calls.run(tx, async (): Promise<Awaited<R>> => {
      try {
        return await call(...args);
      } catch (err) {
        if (tx.commitFailed !== undefined) {
          throw new StoreError(
            `idempotent-tools: the transaction of "${wrapped.name}" did not commit (${(tx.commitFailed as Error)?.message ?? tx.commitFailed}): ` +
              "nothing was recorded and fn's writes were rolled back; the next call runs again",
            { cause: tx.commitFailed },
          );
        }
        throw err;
      } finally {
        // Whatever the protocol did (a control-flow signal may settle nothing), the
        // transaction never outlives the call.
        await store.finish(tx, 'ROLLBACK');
      }
    });
  };
  const result = run(wrapped) as IdempotentFunction<A, R>;
  Object.defineProperty(result, 'name', { value: wrapped.name });
  result.withKey = (key: string) => run(wrapped.withKey(key));
  result.keyFor = wrapped.keyFor;
  return result;
}

function row(r: any) {
  const ms = (v: unknown) => (v == null ? null : Number(v));
  return {
    key: r.key,
    name: r.name,
    fingerprint: r.fingerprint,
    status: r.status,
    result: r.result,
    error: r.error,
    attempts: r.attempts,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    expiresAt: ms(r.expires_at),
    leaseExpiresAt: ms(r.lease_expires_at),
    meta: r.meta,
    durationMs: r.duration_ms,
  };
}

/** The store behind idempotentTx: PostgresStore's statements, sent through the call's client. */
class TxStore implements Store {
  #schema: Promise<void> | undefined;

  constructor(
    private readonly pool: TxPool,
    private readonly sql: native.PostgresSql,
    private readonly onDuplicate: string,
    private readonly pollTimeoutMs: number,
  ) {}

  /** Checks the table's version; creates it when missing (once per pool, retried after a failure). */
  #ensureSchema(): Promise<void> {
    this.#schema ??= (async () => {
      const { rows } = await this.pool.query(this.sql.versionQuery, [this.sql.table]);
      if (rows[0].present) {
        if (rows[0].comment !== this.sql.version) {
          throw new Error(`table ${this.sql.table} is not an idempotent-tools table of ${JSON.stringify(this.sql.version)} (its comment is ${JSON.stringify(rows[0].comment)})`);
        }
        return;
      }
      const client = await this.pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [this.sql.table]);
        await client.query(this.sql.schema);
        await client.query('COMMIT');
        client.release();
      } catch (err) {
        client.release(true);
        throw err;
      }
    })().catch((err) => {
      this.#schema = undefined;
      throw new StoreError(`idempotent-tools: cannot use table ${this.sql.table}: ${(err as Error).message}`, { cause: err });
    });
    return this.#schema;
  }

  async get(key: string): Promise<IdempotencyRecord | null> {
    await this.#ensureSchema();
    const { rows } = await this.pool.query(this.sql.get, [key]);
    return rows.length === 0 ? null : toRecord(row(rows[0]) as any);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const tx = calls.getStore();
    if (tx === undefined) throw new Error('idempotentTx: acquire outside a call');
    // A replay (or a record in the way) is read without opening a write transaction.
    // (Pending records are left to the statement, which decides them on the server's clock.)
    const found = await this.get(request.key);
    if (found !== null && found.status !== 'failed' && (found.status === 'completed' || found.fingerprint !== request.fingerprint)) {
      return { acquired: false, record: found };
    }
    await this.finish(tx, 'ROLLBACK'); // a 'block' loop's earlier attempt
    const client = await this.pool.connect();
    tx.client = client;
    const token = randomBytes(16).toString('hex');
    const lockWait = this.onDuplicate === 'raise' ? 1 : Math.max(1, Math.ceil(this.pollTimeoutMs));
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = ${lockWait}`);
      for (let tries = 0; tries < 8; tries++) {
        const { rows } = await client.query(this.sql.acquire, [
          request.key, request.name, request.fingerprint, token, Math.ceil(request.leaseMs),
          request.ttlMs === undefined ? null : Math.ceil(request.ttlMs), request.force,
          request.meta === undefined ? null : JSON.stringify(request.meta),
        ]);
        if (rows.length === 0) continue; // the row changed after this statement's snapshot
        const r = rows[0];
        if (r.acquired) {
          await client.query('SET LOCAL lock_timeout = 0');
          return { acquired: true, token, attempts: r.attempts, takenOver: r.taken_over };
        }
        await this.finish(tx, 'ROLLBACK');
        return { acquired: false, record: toRecord(row({ ...r, key: request.key }) as any) };
      }
      throw new Error(`key ${request.key} kept changing under 8 tries`);
    } catch (err) {
      await this.finish(tx, 'ROLLBACK');
      if ((err as { code?: string }).code === LOCK_NOT_AVAILABLE) {
        // Another transaction holds the key's row: it is in flight.
        const now = Date.now();
        return {
          acquired: false,
          record: {
            key: request.key, name: request.name, fingerprint: request.fingerprint, status: 'pending',
            result: undefined, error: null, attempts: 1, createdAt: now, updatedAt: now, expiresAt: null,
            leaseExpiresAt: now + request.leaseMs, meta: null, durationMs: null,
          },
        };
      }
      throw err;
    }
  }

  /** Ends the call's transaction (if one is open) and returns its client to the pool. */
  async finish(tx: TxCall, end: 'COMMIT' | 'ROLLBACK'): Promise<void> {
    const client = tx.client;
    if (client === undefined) return;
    tx.client = undefined;
    try {
      await client.query(end);
      client.release();
    } catch (err) {
      client.release(true); // a broken connection is not given back to the pool
      if (end === 'COMMIT') throw err;
    }
  }

  async #settle(request: SettleRequest, status: 'completed' | 'failed'): Promise<boolean> {
    const tx = calls.getStore();
    const client = tx?.client;
    if (tx === undefined || client === undefined) return false;
    if (status === 'failed') {
      // fn threw: its writes and the claim roll back together; the next call runs again.
      await this.finish(tx, 'ROLLBACK');
      return true;
    }
    const error = request.error === undefined ? null : JSON.stringify({ name: request.error.name, message: request.error.message });
    let settled: boolean;
    try {
      const { rows } = await client.query(this.sql.settle, [
        request.key, request.token, status, request.resultJson ?? null, error,
        request.ttlMs === undefined ? null : Math.ceil(request.ttlMs), request.durationMs ?? null,
      ]);
      settled = rows[0].settled;
    } catch (err) {
      tx.commitFailed = err;
      await this.finish(tx, 'ROLLBACK');
      throw err;
    }
    try {
      await this.finish(tx, 'COMMIT');
    } catch (err) {
      tx.commitFailed = err;
      throw err;
    }
    return settled;
  }

  complete(request: SettleRequest): Promise<boolean> {
    return this.#settle(request, 'completed');
  }

  fail(request: SettleRequest): Promise<boolean> {
    return this.#settle(request, 'failed');
  }

  /** The uncommitted claim is invisible to others, who wait on its row lock: no lease to renew. */
  async renew(): Promise<boolean> {
    return true;
  }

  async listRecords(options: ListOptions = {}): Promise<IdempotencyRecord[]> {
    await this.#ensureSchema();
    const { rows } = await this.pool.query(this.sql.list, [options.status ?? null, options.limit ?? null]);
    return rows.map((r) => toRecord(row(r) as any));
  }

  async clear(key?: string): Promise<number> {
    await this.#ensureSchema();
    return (await this.pool.query(this.sql.clear, [key ?? null])).rowCount ?? 0;
  }

  async close(): Promise<void> {
    // The pool is the user's: it stays open.
  }
}
