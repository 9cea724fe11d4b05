// idempotent-tools/pg: the record and the user's writes commit in one transaction.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool, type PoolClient } from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, lineFrom, runNode, tempDir } from './helpers';
import { PG_URL, dropTables, sql, uniqueTable } from './postgres-server';

const { idempotentTx } = require(join(ROOT, 'dist', 'pg.js')) as typeof import('../dist/pg.js');
const WORKER = join(ROOT, '__test__', 'fixtures', 'pg-worker.js');

const pools: Pool[] = [];
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await dropTables();
});

function pool(): Pool {
  const p = new Pool({ connectionString: PG_URL, max: 8 });
  pools.push(p);
  return p;
}

/** A table for the user's own rows (an orders table), and one for the records. */
async function tables() {
  const orders = uniqueTable();
  await sql(`CREATE TABLE "${orders}" (id text PRIMARY KEY)`);
  return { orders, records: uniqueTable() };
}

async function orderCount(orders: string): Promise<number> {
  return Number((await sql(`SELECT count(*) AS n FROM "${orders}"`)).rows[0].n);
}

function worker(mode: string, opts: Record<string, unknown>) {
  return spawn(process.execPath, [WORKER, mode, JSON.stringify(opts)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
}

function logLines(log: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
}

describe('idempotentTx', () => {
  it("loads as 'idempotent-tools/pg' with require and import", async () => {
    const cjs = await runNode(['-e', "console.log(typeof require('idempotent-tools/pg').idempotentTx)"]);
    const esm = await runNode(['--input-type=module', '-e', "import { idempotentTx } from 'idempotent-tools/pg'; console.log(typeof idempotentTx)"]);
    expect([cjs.stdout.trim(), esm.stdout.trim()]).toEqual(['function', 'function']);
  });

  it('refuses a missing pool and a bad table name with a TypeError that says what to pass', () => {
    expect(() => idempotentTx(async function f() {}, {} as never)).toThrow(/options.pool must be a node-postgres Pool/);
    expect(() => idempotentTx(async function f() {}, { pool: pool(), table: 'a;b' })).toThrow(/invalid table name/);
  });

  it('runs fn once, commits its write with the record, and replays the result', async () => {
    const { orders, records } = await tables();
    let runs = 0;
    const placeOrder = idempotentTx(async function placeOrder(client: PoolClient, id: string, cents: number) {
      runs++;
      await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
      return { id, cents, z: 1, a: 2 };
    }, { pool: pool(), table: records });
    expect(await placeOrder('o-1', 500)).toEqual({ id: 'o-1', cents: 500, z: 1, a: 2 });
    expect(await placeOrder('o-1', 500)).toEqual({ id: 'o-1', cents: 500, z: 1, a: 2 });
    expect(runs).toBe(1);
    expect(await orderCount(orders)).toBe(1);
    // The record lives in PostgresStore's table: the store (and the CLI) see it.
    const store = new lib.PostgresStore({ url: PG_URL, table: records });
    const record = await store.get(placeOrder.keyFor('o-1', 500));
    expect(record?.status).toBe('completed');
    expect(record?.name).toBe('placeOrder');
    expect(record?.result).toEqual({ id: 'o-1', cents: 500, z: 1, a: 2 });
    await store.close();
  });

  it('fn throws: its writes and the claim roll back, the error reaches the caller, the next call runs again', async () => {
    const { orders, records } = await tables();
    let runs = 0;
    const placeOrder = idempotentTx(async function placeOrder(client: PoolClient, id: string) {
      runs++;
      await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
      if (runs === 1) throw new RangeError('card declined');
      return { id, runs };
    }, { pool: pool(), table: records });
    await expect(placeOrder('o-2')).rejects.toThrow(RangeError);
    expect(await orderCount(orders)).toBe(0);
    const store = new lib.PostgresStore({ url: PG_URL, table: records });
    expect(await store.get(placeOrder.keyFor('o-2'))).toBeNull();
    expect(await placeOrder('o-2')).toEqual({ id: 'o-2', runs: 2 });
    expect(await placeOrder('o-2')).toEqual({ id: 'o-2', runs: 2 });
    expect(await orderCount(orders)).toBe(1);
    await store.close();
  });

  it('a replay opens no transaction: one plain SELECT', async () => {
    const { orders, records } = await tables();
    const p = pool();
    const seen: string[] = [];
    const spy = {
      query: (text: string, values?: unknown[]) => {
        seen.push(text.trim().split(/\s+/)[0]);
        return p.query(text, values);
      },
      connect: async () => {
        seen.push('connect');
        return p.connect();
      },
    };
    const placeOrder = idempotentTx(async function placeOrder(client: PoolClient, id: string) {
      await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
      return id;
    }, { pool: spy, table: records });
    await placeOrder('o-3');
    expect(seen).toContain('connect'); // the first call took a client for its transaction
    seen.length = 0;
    expect(await placeOrder('o-3')).toBe('o-3');
    expect(seen).toEqual(['--']); // get.sql, which starts with its comment; no connect, no BEGIN
  });

  it('replays issued together are read with one statement, each answered with its own record', async () => {
    const { orders, records } = await tables();
    const p = pool();
    const reads: unknown[][] = [];
    const spy = {
      query: (text: string, values?: unknown[]) => {
        if (text.startsWith('-- get:')) reads.push(values![0] as unknown[]);
        return p.query(text, values);
      },
      connect: () => p.connect(),
    };
    const placeOrder = idempotentTx(async function placeOrder(client: PoolClient, id: string) {
      await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
      return { id };
    }, { pool: spy, table: records });
    const ids = Array.from({ length: 20 }, (_, i) => `o-${i}`);
    for (const id of ids) await placeOrder(id);
    reads.length = 0;
    const replays = await Promise.all([...ids, 'o-0'].map((id) => placeOrder(id)));
    expect(replays).toEqual([...ids, 'o-0'].map((id) => ({ id })));
    expect(reads).toHaveLength(1); // one statement for the 21 reads
    expect(reads[0]).toHaveLength(21);
    expect(await orderCount(orders)).toBe(20);
  });

  it("concurrent duplicates: 'block' waits on the first call's row lock and replays; 'raise' throws at once", async () => {
    const { orders, records } = await tables();
    let runs = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const p = pool();
    const make = (onDuplicate: 'block' | 'raise') =>
      idempotentTx(async function placeOrder(client: PoolClient, id: string) {
        runs++;
        await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
        await gate;
        return { id, runs };
      }, { pool: p, table: records, onDuplicate });
    const first = make('block')('o-4');
    // Until the first call's INSERT of its claim is in, a duplicate may claim first; wait for it.
    while (runs === 0) await new Promise((r) => setImmediate(r));
    await expect(make('raise')('o-4')).rejects.toBeInstanceOf(lib.DuplicateInFlightError);
    const second = make('block')('o-4');
    open();
    expect(await first).toEqual({ id: 'o-4', runs: 1 });
    expect(await second).toEqual({ id: 'o-4', runs: 1 });
    expect(runs).toBe(1);
    expect(await orderCount(orders)).toBe(1);
  });

  it('4 processes racing on the same 50 keys: one order row and one run per key', async () => {
    const { orders, records } = await tables();
    const log = join(tempDir(), 'effects.log');
    const finished = await Promise.all(
      Array.from({ length: 4 }, () => collect(worker('tx-race', { url: PG_URL, table: records, orders, log, keys: 50 }))),
    );
    for (const f of finished) expect(f.stderr).toBe('');
    expect(finished.map((f) => f.code)).toEqual([0, 0, 0, 0]);
    expect(await orderCount(orders)).toBe(50);
    expect(logLines(log).length).toBe(50);
  });

  it("SIGKILL between the user's INSERT and COMMIT leaves neither the row nor a record, and the next call runs once", async () => {
    const { orders, records } = await tables();
    const log = join(tempDir(), 'effects.log');
    const child = worker('tx-insert-and-hang', { url: PG_URL, table: records, orders, log, key: 'o-5' });
    const exited = collect(child);
    await lineFrom(child, /^INSERTED/);
    child.kill('SIGKILL');
    expect((await exited).signal).toBe('SIGKILL');
    let runs = 0;
    const placeOrder = idempotentTx(async function placeOrder(client: PoolClient, id: string) {
      runs++;
      await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
      return { id };
    }, { pool: pool(), table: records, onDuplicate: 'block' });
    // The server ends the dead client's transaction when it notices the closed socket; a
    // 'block' call waits on that row lock until then.
    expect(await placeOrder('o-5')).toEqual({ id: 'o-5' });
    expect(await placeOrder('o-5')).toEqual({ id: 'o-5' });
    expect(runs).toBe(1);
    expect(await orderCount(orders)).toBe(1);
    const store = new lib.PostgresStore({ url: PG_URL, table: records });
    const record = await store.get(placeOrder.keyFor('o-5'));
    expect(record?.status).toBe('completed');
    expect(record?.attempts).toBe(1); // the killed attempt left nothing behind
    await store.close();
  });
});
