// The crash matrix for step() and idempotentTx (issue 19): a process SIGKILLed at each
// point of a call with two steps, on SQLite, Redis and Postgres, with a ttlMs shorter
// than the dead owner's lease; and an idempotentTx call killed before and after its
// commit. The invariant: a recorded step never runs again, however long its call waits;
// the only duplicate is a crash between a step's side effect and its record; in
// idempotentTx not even that (the row and the record commit together).

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool, type PoolClient } from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, tempDir, testHooks } from './helpers';
import { PG_URL, dropTables, sql, uniqueTable } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';
import { afterTheOwner, openWhere, threeStores } from './stores';

const { idempotent, step } = lib;
const { idempotentTx } = require(join(ROOT, 'dist', 'pg.js')) as typeof import('../dist/pg.js');
const WORKER = join(ROOT, '__test__', 'fixtures', 'steps-worker.js');
const LEASE_MS = 1500;
const TTL_MS = 100;
const redis = await sharedRedis();
const pools: Pool[] = [];
afterAll(async () => {
  await redis.stop();
  await Promise.all(pools.map((p) => p.end()));
  await dropTables();
});

const places = threeStores(redis.url, uniquePrefix);

function effects(log: string): Record<string, number> {
  const counts: Record<string, number> = {};
  if (!existsSync(log)) return counts;
  for (const line of readFileSync(log, 'utf8').split('\n').filter(Boolean)) {
    const what = line.split(' ')[0];
    counts[what] = (counts[what] ?? 0) + 1;
  }
  return counts;
}

// [where it dies, the effects the crash leaves, the effects after the next call]
const points: Array<[string, Record<string, number>, Record<string, number>]> = [
  ['after-charge', { charge: 1 }, { charge: 1, email: 1 }],
  ['in-email', { charge: 1, email: 1 }, { charge: 1, email: 2 }], // the one window: a step's effect before its record
  ['after-steps', { charge: 1, email: 1 }, { charge: 1, email: 1 }],
];

for (const [storeName, place] of places) {
  describe.concurrent(`crash inside a call with steps: ${storeName}`, () => {
    for (const [dieAt, afterCrash, inTheEnd] of points) {
      it(`killed ${dieAt}: the next call (after the lease, past ttlMs) replays what was recorded`, async () => {
        const where = place();
        const log = join(tempDir(), 'effects.log');
        const key = 'order-1';
        const child = spawn(process.execPath, [WORKER, 'steps', JSON.stringify({ ...where, log, key, leaseMs: LEASE_MS, ttlMs: TTL_MS, dieAt })], {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        const died = await collect(child);
        expect(died.signal, died.stderr).toBe('SIGKILL');
        expect(effects(log)).toEqual(afterCrash);

        const store = openWhere(where);
        try {
          const { appendFileSync } = require('node:fs') as typeof import('node:fs');
          const order = idempotent(async function order(id: string) {
            const charge = await step('charge', async () => {
              appendFileSync(log, 'charge parent\n');
              return `ch_${id}`;
            });
            const email = await step('email', async () => {
              appendFileSync(log, 'email parent\n');
              return `em_${id}`;
            });
            return { charge, email };
          }, { store, leaseMs: LEASE_MS, ttlMs: TTL_MS });
          expect(await afterTheOwner(() => order.withKey(key)(key))).toEqual({ charge: 'ch_order-1', email: 'em_order-1' });
          expect(await order.withKey(key)(key)).toEqual({ charge: 'ch_order-1', email: 'em_order-1' });
          expect(effects(log)).toEqual(inTheEnd);
        } finally {
          await store.close();
        }
      });
    }
  });
}

describe.concurrent('crash inside idempotentTx: the row and its record commit together', () => {
  const txPoints: Array<[string, string, number]> = [
    ['after the claim, before fn', 'after-acquire', 0],
    ['after the insert, before the commit', 'after-fn', 1],
    ['after the commit, before the promise resolves', 'after-complete', 1],
  ];
  for (const [point, fault, insertsBeforeCrash] of txPoints) {
    it(`killed ${point}: the table holds the row once, and the next call replays or writes it once`, async () => {
      const orders = uniqueTable();
      const table = uniqueTable();
      await sql(`CREATE TABLE "${orders}" (id text)`);
      const log = join(tempDir(), 'effects.log');
      const key = 'o-1';
      const child = spawn(process.execPath, [WORKER, 'tx', JSON.stringify({ postgres: PG_URL, table, orders, log, key })], {
        cwd: ROOT,
        env: { ...process.env, ...testHooks({ IDEMPOTENT_TOOLS_FAULT: fault }) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const died = await collect(child);
      expect(died.signal, died.stderr).toBe('SIGKILL');
      expect(effects(log).insert ?? 0).toBe(insertsBeforeCrash);

      const pool = new Pool({ connectionString: PG_URL, max: 2 });
      pools.push(pool);
      let ran = 0;
      const placeOrder = idempotentTx(async function placeOrder(client: PoolClient, id: string) {
        ran++;
        await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
        return { id };
      }, { pool, table });
      expect(await afterTheOwner(() => placeOrder.withKey(key)(key))).toEqual({ id: key });
      expect(await placeOrder.withKey(key)(key)).toEqual({ id: key });
      expect(ran).toBe(fault === 'after-complete' ? 0 : 1);
      expect(Number((await sql(`SELECT count(*) AS n FROM "${orders}"`)).rows[0].n)).toBe(1);
    });
  }
});
