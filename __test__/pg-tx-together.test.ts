// idempotentTx where it meets other features (issue 19, findings 1, 2, 4, 5 and 9): a TTL
// and a long transaction, step(), two wrappers of one name, the user's lock_timeout, a
// nested call, fn ending the transaction itself, and keys PostgreSQL text cannot hold.

import { join } from 'node:path';
import { Pool, type PoolClient } from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib } from './helpers';
import { PG_URL, dropTables, sql, uniqueTable } from './postgres-server';

const { idempotentTx } = require(join(ROOT, 'dist', 'pg.js')) as typeof import('../dist/pg.js');
const { step, PostgresStore, StoreError } = lib;

const pools: Pool[] = [];
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await dropTables();
});

function pool(extra: Record<string, unknown> = {}): Pool {
  const p = new Pool({ connectionString: PG_URL, max: 4, ...extra });
  pools.push(p);
  return p;
}

async function tables() {
  const orders = uniqueTable();
  await sql(`CREATE TABLE "${orders}" (id text, cents integer)`);
  return { orders, records: uniqueTable() };
}

const count = async (orders: string) => Number((await sql(`SELECT count(*) AS n FROM "${orders}"`)).rows[0].n);

/** Resolves once the wall clock has passed `epochMs` (waiting for time itself). */
async function clockPast(epochMs: number): Promise<void> {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, Math.max(1, epochMs - Date.now() + 1)));
}

describe('idempotentTx with a ttlMs, and a transaction longer than ttlMs and leaseMs (finding 1)', () => {
  it('commits the write with its record, and the next call replays: the row is written once', async () => {
    const { orders, records } = await tables();
    let runs = 0;
    const addOrder = idempotentTx(
      async function addOrder(client: PoolClient, id: string) {
        runs++;
        await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
        await clockPast(Date.now() + 1300); // longer than ttlMs and leaseMs
        return { id };
      },
      // A ttl long enough for the replay below to come before the record expires.
      { pool: pool(), table: records, ttlMs: 1000, leaseMs: 100 },
    );
    expect(await addOrder('o-1')).toEqual({ id: 'o-1' });
    expect(await addOrder('o-1')).toEqual({ id: 'o-1' });
    expect(runs).toBe(1);
    expect(await count(orders)).toBe(1);
    // The row as stored (a read through a store would hide it once expired).
    const { rows } = await sql(`SELECT status, expires_at - updated_at AS ttl FROM "${records}" WHERE key = $1`, [addOrder.keyFor('o-1')]);
    expect(rows).toEqual([{ status: 'completed', ttl: '1000' }]); // ttlMs counts from the settle
  });
});

describe('fn ending the call\'s transaction itself (finding 1)', () => {
  it('COMMIT inside fn: a TypeError that says so; the call is recorded and never writes again', async () => {
    const { orders, records } = await tables();
    let runs = 0;
    const addOrder = idempotentTx(
      async function addOrder(client: PoolClient, id: string) {
        runs++;
        await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
        await client.query('COMMIT');
        return { id };
      },
      { pool: pool(), table: records },
    );
    await expect(addOrder('o-1')).rejects.toThrow(/ended the call's transaction itself.*recorded as completed/s);
    expect(await addOrder('o-1')).toEqual({ id: 'o-1' });
    expect(runs).toBe(1);
    expect(await count(orders)).toBe(1);
  });

  it('ROLLBACK inside fn: a TypeError that says so; nothing is recorded', async () => {
    const { orders, records } = await tables();
    const addOrder = idempotentTx(
      async function addOrder(client: PoolClient, id: string) {
        await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
        await client.query('ROLLBACK');
        return { id };
      },
      { pool: pool(), table: records },
    );
    await expect(addOrder('o-1')).rejects.toThrow(/ended the call's transaction itself.*not recorded/s);
    expect(await count(orders)).toBe(0);
    const store = new PostgresStore({ url: PG_URL, table: records });
    const record = await store.get(addOrder.keyFor('o-1'));
    await store.close();
    expect(record?.status ?? null).not.toBe('completed');
  });
});

describe('step() inside idempotentTx (finding 2)', () => {
  it('is a TypeError that says why; the call\'s transaction rolls back whole, and a pool of one connection does not hang', async () => {
    const { orders, records } = await tables();
    const one = pool({ max: 1 });
    const transfer = idempotentTx(
      async function transfer(client: PoolClient, id: string) {
        await client.query(`INSERT INTO "${orders}" (id, cents) VALUES ($1, -100)`, [id]); // the debit
        await step('credit', async () => {
          await client.query(`INSERT INTO "${orders}" (id, cents) VALUES ($1, 100)`, [id]);
        });
        return { id };
      },
      { pool: one, table: records },
    );
    await expect(transfer('t-1')).rejects.toThrow(/step\(\) inside idempotentTx/);
    expect(await count(orders)).toBe(0);
    // The one client went back to the pool, outside any transaction.
    const { rows } = await one.query('SELECT txid_current_if_assigned() AS tx');
    expect(rows[0].tx).toBeNull();
    await expect(transfer('t-1')).rejects.toThrow(/step\(\) inside idempotentTx/);
    expect(await count(orders)).toBe(0);
  });
});

describe('two wrappers of one name on one database and table (finding 4)', () => {
  it('the second wrap of another function is a TypeError, on one pool or two, and beside a PostgresStore', async () => {
    const { orders, records } = await tables();
    const p = pool();
    const first = idempotentTx(async function addOrder(client: PoolClient, user: number) {
      await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [String(user)]);
      return { order: user };
    }, { pool: p, table: records });
    const other = async function addOrder(_client: PoolClient, user: number) {
      return { user };
    };
    expect(() => idempotentTx(other, { pool: p, table: records })).toThrow(/the name "addOrder" is already used/);
    expect(() => idempotentTx(other, { pool: pool(), table: records })).toThrow(/the name "addOrder" is already used/);
    const store = new PostgresStore({ url: PG_URL, table: records });
    expect(() => lib.idempotent(async function addOrder(user: number) {
      return { user };
    }, { store })).toThrow(/the name "addOrder" is already used/);
    await store.close();
    // Another table is another place: the name is free there.
    expect(() => idempotentTx(other, { pool: p, table: uniqueTable() })).not.toThrow();
    expect(await first(7)).toEqual({ order: 7 });
    expect(await count(orders)).toBe(1);
  });
});

describe("the user's session settings and a nested call (finding 5)", () => {
  it("fn runs under the user's own lock_timeout, not one idempotentTx chose", async () => {
    const { records } = await tables();
    const p = pool();
    p.on('connect', (c) => void c.query('SET lock_timeout = 500'));
    const seen = idempotentTx(async function seen(client: PoolClient) {
      return (await client.query('SHOW lock_timeout')).rows[0].lock_timeout;
    }, { pool: p, table: records });
    expect(await seen()).toBe('500ms');
    const plain = idempotentTx(async function plain(client: PoolClient) {
      return (await client.query('SHOW lock_timeout')).rows[0].lock_timeout;
    }, { pool: pool(), table: records, onDuplicate: 'block' });
    expect(await plain()).toBe('0');
  });

  it('an UPDATE that waits on a locked row fails after the user\'s lock_timeout', async () => {
    const { orders, records } = await tables();
    await sql(`INSERT INTO "${orders}" (id, cents) VALUES ('o-1', 1)`);
    const holder = pool({ max: 1 });
    const held = await holder.connect();
    await held.query('BEGIN');
    await held.query(`SELECT * FROM "${orders}" WHERE id = 'o-1' FOR UPDATE`);
    const p = pool();
    p.on('connect', (c) => void c.query('SET lock_timeout = 300'));
    const bump = idempotentTx(async function bump(client: PoolClient) {
      await client.query(`UPDATE "${orders}" SET cents = cents + 1 WHERE id = 'o-1'`);
      return 'bumped';
    }, { pool: p, table: records });
    // Released only after the outcome is known: a call that waited for the row would
    // still be waiting here, and this test would time out.
    const outcome = await bump().then((v) => v, (e: { code?: string }) => `error ${e.code}`);
    await held.query('ROLLBACK');
    held.release();
    expect(outcome).toBe('error 55P03');
  });

  it('an idempotentTx call inside another one\'s fn is a TypeError (it could wait forever on the outer rows)', async () => {
    const { orders, records } = await tables();
    const p = pool();
    const inner = idempotentTx(async function inner(client: PoolClient, id: string) {
      await client.query(`UPDATE "${orders}" SET cents = 2 WHERE id = $1`, [id]);
      return 'inner';
    }, { pool: p, table: records });
    const outer = idempotentTx(async function outer(client: PoolClient, id: string) {
      await client.query(`INSERT INTO "${orders}" (id, cents) VALUES ($1, 1)`, [id]);
      return inner(id);
    }, { pool: p, table: records });
    await expect(outer('o-1')).rejects.toThrow(/inside the transaction of another idempotentTx call \("outer"\)/);
    expect(await count(orders)).toBe(0);
  });
});

describe('keys and names PostgreSQL text cannot hold (finding 9)', () => {
  const nul = 'order\u0000-1';
  const long = 'k'.repeat(3000);

  it('idempotentTx refuses them with a TypeError naming the key, before fn runs', async () => {
    const { records } = await tables();
    let runs = 0;
    const f = idempotentTx(async function f() {
      runs++;
      return 1;
    }, { pool: pool(), table: records });
    for (const key of [nul, long]) {
      const err = await f.withKey(key)().then(() => null, (e) => e);
      expect(err).toBeInstanceOf(TypeError);
      expect(err).not.toBeInstanceOf(StoreError);
      expect(err.message).toMatch(key === nul ? /U\+0000/ : /3000 bytes/);
    }
    const named = idempotentTx(async function f2() {
      runs++;
    }, { pool: pool(), table: records, name: 'bad\u0000name' });
    await expect(named()).rejects.toThrow(/name .* U\+0000/);
    expect(runs).toBe(0);
  });

  it('PostgresStore refuses them the same way, and keeps a long key under the limit exactly', async () => {
    const store = new PostgresStore({ url: PG_URL, table: uniqueTable() });
    let runs = 0;
    const f = lib.idempotent(async function pgKeys(x: number) {
      runs++;
      return x;
    }, { store });
    for (const key of [nul, long]) {
      const err = await f.withKey(key)(1).then(() => null, (e) => e);
      expect(err).toBeInstanceOf(TypeError);
      expect(err).not.toBeInstanceOf(StoreError);
    }
    expect(runs).toBe(0);
    const near = 'é'.repeat(1000); // 2000 bytes
    expect(await f.withKey(near)(2)).toBe(2);
    expect(await f.withKey(near)(2)).toBe(2);
    expect(runs).toBe(1);
    expect((await store.get(near))?.key).toBe(near);
    await store.close();
  });
});

/** Resolves once `n` sessions of `applicationName` wait on a lock (a row another transaction holds). */
async function waitingOnLock(applicationName: string, n = 1): Promise<void> {
  for (;;) {
    const { rows } = await sql(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
      [applicationName],
    );
    if (rows[0].n >= n) return;
    await new Promise((r) => setImmediate(r)); // ask the server again
  }
}

describe('a duplicate that waited on the claim of an expired record (issue 19, model seed 311262746)', () => {
  it("a 'block' copy that waited on the first copy's row lock gets the first copy's new result, not the expired one", async () => {
    const { records } = await tables();
    const app = `expired-claim-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    let runs = 0;
    let entered!: () => void;
    const inFn = new Promise<void>((r) => (entered = r));
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const charge = idempotentTx(
      async function charge(_client: PoolClient, id: string) {
        const run = ++runs;
        if (run === 2) {
          entered();
          await gate; // holds the claim (and its row lock) in its transaction
        }
        return { id, run };
      },
      { pool: pool({ application_name: app }), table: records, ttlMs: 60_000, onDuplicate: 'block' },
    );
    expect(await charge('c-1')).toEqual({ id: 'c-1', run: 1 });
    // The completed record expires (as ttlMs would make it, without waiting for the clock).
    const key = charge.keyFor('c-1');
    await sql(`UPDATE "${records}" SET expires_at = updated_at WHERE key = $1`, [key]);

    const first = charge('c-1'); // claims the expired record, and waits in fn
    await inFn;
    const second = charge('c-1'); // its claim statement waits on the first one's row lock
    await waitingOnLock(app);
    open();
    expect(await first).toEqual({ id: 'c-1', run: 2 });
    expect(await second).toEqual({ id: 'c-1', run: 2 }); // the expired record's { run: 1 } before the fix
    expect(runs).toBe(2);
  });
});
