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
 * instead of replaying; retry the call. Replays read with a plain SELECT, outside any
 * transaction: the reads of one turn of the event loop are one statement.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';

import { Batcher } from './batch.js';
import { STEPS_REFUSED } from '../core/call-context.js';
import { StoreError } from '../core/errors.js';
import { type IdempotentFunction, idempotent } from '../core/idempotent.js';
import { KEY_ID_SECRET, withoutKeyIdSecret } from '../core/key-id.js';
import { RECORDS_PLACE, WRAPS } from '../core/names.js';
import * as native from '../core/native.js';
import { toRecord } from './native-store.js';
import type { IdempotentOptions } from '../core/options.js';
import { checkPostgresText, postgresPlace } from './postgres-store.js';
import { type AcquireRequest, type AcquireResult, CLAIMS_LOCKED, type IdempotencyRecord, type ListOptions, type SettleRequest, type Store } from '../core/store.js';

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
  /** The wrapper's name (for messages). */
  name: string;
  client: TxClient | undefined;
  /** The transaction's id once the claim is made: how the settle knows that fn left it open. */
  txid?: string;
  /** True while fn runs: another idempotentTx call from inside it is refused. */
  inFn?: boolean;
  /** COMMIT failed: nothing was recorded, and fn's writes were rolled back. */
  commitFailed?: unknown;
  /** fn sent COMMIT or ROLLBACK itself: what became of the call (see TxStore.#settle). */
  endedByFn?: { recorded: boolean };
}

const calls = new AsyncLocalStorage<TxCall>();

/** The claim rule says a duplicate is in flight: the first call's transaction holds the row. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Bounds the claim statement's wait for a row lock (a duplicate's transaction) by `$1` ms,
 * never widening a `lock_timeout` the user set (0 is none), and returns the user's own
 * setting so that it is restored after the claim: fn runs under the user's session
 * settings, untouched. `set_config(..., true)` lasts until the transaction ends.
 */
const CLAIM_LOCK_TIMEOUT =
  "SELECT s.setting AS prior, set_config('lock_timeout', (CASE WHEN s.setting::bigint > 0 " +
  'THEN least(s.setting::bigint, $1::bigint) ELSE $1::bigint END)::text, true) AS claim ' +
  "FROM pg_settings AS s WHERE s.name = 'lock_timeout'";
/** After the claim: the user's lock_timeout again, and the transaction's id. */
const AFTER_CLAIM = "SELECT set_config('lock_timeout', $1::text, true) AS restored, txid_current()::text AS txid";
/** Before the settle: the id of the transaction the client is in now (null: none, or one that wrote nothing). */
const CURRENT_TX = 'SELECT txid_current_if_assigned()::text AS txid';

/**
 * Wraps `fn(client, ...args)` so that it runs once per key, inside one transaction with
 * its record. Returns a function of `...args` (the client is supplied), with `withKey`
 * and `keyFor` as `idempotent()`'s. `onDuplicate` for a call whose key another
 * transaction holds: `'raise'` throws `DuplicateInFlightError` at once; `'block'` (and
 * `'retry'`, which cannot run beside an uncommitted claim) waits on that transaction's row
 * lock up to `pollTimeoutMs` (or the user's own shorter `lock_timeout`), then replays its
 * result or runs if it rolled back.
 *
 * The transaction is the call's: fn must not end it (COMMIT, ROLLBACK; savepoints are
 * fine), must not `step()` (its writes already commit exactly once, with the record), and
 * must not start another idempotentTx call (a second transaction on another connection,
 * which could wait forever on rows this one holds). Each is a `TypeError`.
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
  const store = new TxStore(pool, sql, table, rest.onDuplicate ?? 'raise', rest.pollTimeoutMs ?? 30000);
  const name = rest.name ?? fn.name;
  // Named as fn (an anonymous fn without a name is idempotent()'s TypeError).
  const inTx = {
    [name]: async (...args: A) => {
      const call = calls.getStore();
      if (call?.client === undefined) throw new Error('idempotentTx: internal error: no transaction for this call');
      call.inFn = true;
      try {
        return await fn(call.client as ClientOf<P>, ...args);
      } finally {
        call.inFn = false;
      }
    },
  }[name];
  const wrapped = idempotent(inTx, { ...rest, store, [WRAPS]: fn } as IdempotentOptions<A>);
  const run = (call: (...args: A) => Promise<Awaited<R>>) => (...args: A): Promise<Awaited<R>> => {
    const outer = calls.getStore();
    if (outer?.inFn) {
      return Promise.reject(
        new TypeError(
          `idempotentTx: "${wrapped.name}" was called inside the transaction of another idempotentTx call ("${outer.name}"). ` +
            'It would open a second transaction on another connection, which can wait forever on rows the first one holds. ' +
            "Run its body on the client you were given (its writes then commit with the outer call's), or call it after the outer call returns",
        ),
      );
    }
    const tx: TxCall = { name: wrapped.name, client: undefined };
    return calls.run(tx, async (): Promise<Awaited<R>> => {
      try {
        const value = await call(...args);
        if (tx.endedByFn !== undefined) throw endedByFnError(wrapped.name, tx.endedByFn.recorded);
        return value;
      } catch (err) {
        if (tx.endedByFn !== undefined) throw endedByFnError(wrapped.name, tx.endedByFn.recorded, err);
        if (tx.commitFailed !== undefined && err instanceof StoreError && err.outcome === 'unknown') {
          // COMMIT got no answer (the connection died) and the record could not be read:
          // the transaction may have committed. Never say it did not.
          throw new StoreError(
            `idempotent-tools: the transaction of "${wrapped.name}" sent COMMIT and got no answer ` +
              `(${(tx.commitFailed as Error)?.message ?? tx.commitFailed}), and reading the record back failed too: whether it ` +
              "committed is unknown. If it did, fn's writes and the record were kept together and the next call returns the " +
              "result; if not, neither was kept and the next call runs again",
            { key: err.key, cause: tx.commitFailed, outcome: 'unknown' },
          );
        }
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

function endedByFnError(name: string, recorded: boolean, cause?: unknown): TypeError {
  return new TypeError(
    `idempotentTx: fn of "${name}" ended the call's transaction itself (it sent COMMIT, ROLLBACK or END). ` +
      'The transaction is the call\'s: idempotentTx commits it with the record, or rolls both back. ' +
      (recorded
        ? "fn's writes were committed by fn, and the call is recorded as completed (the next call replays it). "
        : 'The call is not recorded (its claim was rolled back with the writes made before it); writes fn made after that were committed on their own. ') +
      'Use SAVEPOINT / ROLLBACK TO SAVEPOINT inside fn instead',
    cause === undefined ? undefined : { cause },
  );
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
  readonly #place: string;
  /** The reads of one turn of the event loop, as one statement (PostgresStore's get, for many keys). */
  readonly #reads = new Batcher<string, any>(async (keys) => {
    const { rows } = await this.pool.query(this.sql.get, [keys]);
    const found = new Map(rows.map((r) => [r.key, r]));
    return keys.map((key) => ({ value: found.get(key) ?? null }));
  });

  constructor(
    private readonly pool: TxPool,
    private readonly sql: native.PostgresSql,
    table: string | undefined,
    private readonly onDuplicate: string,
    private readonly pollTimeoutMs: number,
  ) {
    this.#place = postgresPlace((pool as { options?: object }).options ?? {}, table);
  }

  /** @internal Two wrappers on one database and table share one set of names. */
  get [RECORDS_PLACE](): string {
    return this.#place;
  }

  /** @internal step() inside fn: refused (see idempotentTx). */
  get [STEPS_REFUSED](): string {
    return (
      "step() inside idempotentTx: fn's writes already commit exactly once, together with the call's record, " +
      'and a step would need a transaction of its own. Write the step\'s work on the client you were given; ' +
      'for a side effect outside the database, wrap it with idempotent() (and a PostgresStore) and call it after the transaction'
    );
  }

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
    checkPostgresText(key);
    await this.#ensureSchema();
    const found = await this.#reads.call(key);
    return found === null ? null : toRecord(row(found) as any);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const tx = calls.getStore();
    if (tx === undefined) throw new Error('idempotentTx: acquire outside a call');
    checkPostgresText(request.key, request.name);
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
      const { rows: bound } = await client.query(CLAIM_LOCK_TIMEOUT, [lockWait]);
      const userLockTimeout = String(bound[0].prior);
      for (let tries = 0; tries < 8; tries++) {
        // PostgresStore's claim statement, as a batch of one.
        const { rows } = await client.query(this.sql.acquire, [
          [request.key], [request.name], [request.fingerprint], [token], [Math.ceil(request.leaseMs)], [request.force],
          [request.meta === undefined ? null : JSON.stringify(request.meta)],
        ]);
        const r = rows[0];
        // No row, neither acquired nor refused: the row appeared or changed after this
        // statement's snapshot (it waited for the writer), so the snapshot's row is stale: claim again.
        if (r === undefined) continue;
        if (r.acquired) {
          const { rows: after } = await client.query(AFTER_CLAIM, [userLockTimeout]);
          tx.txid = after[0].txid;
          return { acquired: true, token, attempts: r.attempts, takenOver: r.taken_over };
        }
        await this.finish(tx, 'ROLLBACK');
        return { acquired: false, record: toRecord(row(r) as any) };
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

  #settleParams(request: SettleRequest, status: 'completed' | 'failed'): unknown[] {
    const error = request.error === undefined ? null : JSON.stringify({ name: request.error.name, message: request.error.message });
    // PostgresStore's settle statement, as a batch of one.
    return [
      [request.key], [request.token], [status], [request.resultJson ?? null], [error],
      [request.ttlMs === undefined ? null : Math.ceil(request.ttlMs)], [request.durationMs ?? null],
    ];
  }

  /**
   * PostgresStore's settle statement, as a batch of one: whether it settled the claim. Sent
   * again while it answers with no row (the row changed after the statement's snapshot, so
   * the snapshot cannot tell), as PostgresStore does.
   */
  async #sendSettle(via: Pick<TxClient, 'query'>, request: SettleRequest, status: 'completed' | 'failed'): Promise<boolean> {
    for (let tries = 0; tries < 8; tries++) {
      const { rows } = await via.query(this.sql.settle, this.#settleParams(request, status));
      if (rows[0] !== undefined) return rows[0].settled === true;
    }
    throw new Error(`key ${request.key} kept changing under 8 tries`);
  }

  /**
   * Commits only when the settle statement settled the claim this transaction holds;
   * otherwise rolls back, so fn's writes are never kept without their record.
   */
  async #settle(request: SettleRequest, status: 'completed' | 'failed'): Promise<boolean> {
    const tx = calls.getStore();
    const client = tx?.client;
    if (tx === undefined || client === undefined) return false;
    if (status === 'failed') {
      // fn threw: its writes and the claim roll back together; the next call runs again.
      await this.finish(tx, 'ROLLBACK');
      return true;
    }
    let settled: boolean;
    try {
      const { rows: current } = await client.query(CURRENT_TX);
      if (current[0].txid !== tx.txid) return await this.#endedByFn(tx, client, request);
      settled = await this.#sendSettle(client, request, status);
    } catch (err) {
      tx.commitFailed = err;
      await this.finish(tx, 'ROLLBACK');
      throw err;
    }
    if (!settled) {
      await this.finish(tx, 'ROLLBACK');
      return false;
    }
    try {
      await this.finish(tx, 'COMMIT');
    } catch (err) {
      tx.commitFailed = err;
      throw err;
    }
    return true;
  }

  /**
   * fn sent COMMIT or ROLLBACK itself. After a COMMIT the claim is committed with fn's
   * writes: it is settled now (on its own), so the call is recorded and never runs again.
   * After a ROLLBACK the claim is gone: nothing to settle. Either way the caller gets a
   * TypeError, and the client, in a state nobody knows, is not given back to the pool.
   */
  async #endedByFn(tx: TxCall, client: TxClient, request: SettleRequest): Promise<boolean> {
    tx.client = undefined;
    client.release(true);
    let recorded = false;
    try {
      recorded = await this.#sendSettle(this.pool, request, 'completed');
    } finally {
      tx.endedByFn = { recorded };
    }
    return recorded;
  }

  complete(request: SettleRequest): Promise<boolean> {
    return this.#settle(request, 'completed');
  }

  fail(request: SettleRequest): Promise<boolean> {
    return this.#settle(request, 'failed');
  }

  /**
   * @internal The key-id secret's record (key-id.ts) is written outside any call: the
   * same claim and settle statements, each committed on its own.
   */
  [KEY_ID_SECRET](): Pick<Store, 'get' | 'acquire' | 'complete'> {
    return {
      get: (key) => this.get(key),
      acquire: async (request) => {
        checkPostgresText(request.key, request.name);
        await this.#ensureSchema();
        const token = randomBytes(16).toString('hex');
        const { rows } = await this.pool.query(this.sql.acquire, [
          [request.key], [request.name], [request.fingerprint], [token], [Math.ceil(request.leaseMs)], [request.force], [null],
        ]);
        const r = rows[0];
        if (r.acquired) return { acquired: true, token, attempts: r.attempts, takenOver: r.taken_over };
        return { acquired: false, record: toRecord(row({ ...r, key: request.key }) as any) };
      },
      complete: async (request) => {
        const { rows } = await this.pool.query(this.sql.settle, this.#settleParams(request, 'completed'));
        return rows[0].settled === true;
      },
    };
  }

  /** @internal The claim is this call's row lock: no other caller takes it over, however late its reply (lease.ts). */
  get [CLAIMS_LOCKED](): boolean {
    return true;
  }

  /** The uncommitted claim is invisible to others, who wait on its row lock: no lease to renew. */
  async renew(): Promise<boolean> {
    return true;
  }

  async listRecords(options: ListOptions = {}): Promise<IdempotencyRecord[]> {
    await this.#ensureSchema();
    const { rows } = await this.pool.query(this.sql.list, [options.status ?? null, options.limit ?? null]);
    return withoutKeyIdSecret(rows as Array<{ key: string; name: string }>, options).map((r) => toRecord(row(r) as any));
  }

  async clear(key?: string): Promise<number> {
    await this.#ensureSchema();
    return (await this.pool.query(this.sql.clear, [key ?? null])).rowCount ?? 0;
  }

  async close(): Promise<void> {
    // The pool is the user's: it stays open.
  }
}
