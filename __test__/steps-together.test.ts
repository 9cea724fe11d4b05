// step() where it meets other features (issue 19, findings 3, 7 and 8): a step belongs to
// its call (key and fingerprint), lives as long as the call is unfinished whatever its
// ttlMs, and settles through the same retry-and-read-back path as calls.

import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';

import { join } from 'node:path';

import { ROOT, lib, lineFrom, tempDb } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';

const { idempotent, step, SqliteStore, RedisStore, PostgresStore } = lib;
const redis = await sharedRedis();
afterAll(async () => {
  await redis.stop();
  await dropTables();
});

const stores: Array<[string, () => InstanceType<typeof SqliteStore> | InstanceType<typeof RedisStore> | InstanceType<typeof PostgresStore>]> = [
  ['SqliteStore', () => new SqliteStore({ path: tempDb() })],
  ['RedisStore', () => new RedisStore({ url: redis.url, prefix: uniquePrefix() })],
  ['PostgresStore', () => new PostgresStore({ url: PG_URL, table: uniqueTable() })],
];

/** Resolves once the wall clock has passed `epochMs` (waiting for time itself). */
async function clockPast(epochMs: number): Promise<void> {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, Math.max(1, epochMs - Date.now() + 1)));
}

for (const [storeName, open] of stores) {
  describe(`steps and their call: ${storeName}`, () => {
    it('a corrected call under the same key (other arguments) runs its own step: it never replays the failed call\'s charge', async () => {
      const store = open();
      const charges: number[] = [];
      let failFirst = true;
      const checkout = idempotent(
        async function checkout(order: { id: string; cents: number }) {
          const charge = await step('charge', async () => {
            charges.push(order.cents);
            return { charged: order.cents };
          });
          if (failFirst) {
            failFirst = false;
            throw new Error('the receipt could not be sent');
          }
          return charge;
        },
        { store, key: (order) => `checkout-${order.id}` },
      );
      await expect(checkout({ id: 'o-1', cents: 100 })).rejects.toThrow(/receipt/);
      expect(await checkout({ id: 'o-1', cents: 150 })).toEqual({ charged: 150 });
      expect(charges).toEqual([100, 150]);
      // The same call again, from the top: its own step replays.
      await store.clear(checkout.keyFor({ id: 'o-1', cents: 150 }));
      expect(await checkout({ id: 'o-1', cents: 150 })).toEqual({ charged: 150 });
      expect(charges).toEqual([100, 150]);
      await store.close();
    });

    it('a step outlives ttlMs while its call is unfinished: the retry long after replays it, the card is charged once', async () => {
      const store = open();
      let charges = 0;
      let failures = 1;
      const ttlMs = 60;
      const book = idempotent(
        async function book(trip: string) {
          const charge = await step('charge', async () => ({ charge: ++charges, trip }));
          if (failures-- > 0) throw new Error('the confirmation step failed');
          return charge;
        },
        { store, ttlMs },
      );
      await expect(book('t-1')).rejects.toThrow(/confirmation/);
      await clockPast(Date.now() + 4 * ttlMs); // the call waits (a human, a retry) longer than ttlMs
      expect(await book('t-1')).toEqual({ charge: 1, trip: 't-1' });
      expect(charges).toBe(1);
      await store.close();
    });
  });
}

describe('a step settles through the retry path: SQLite', () => {
  for (const leaseMs of [60_000, 400])
  it(`another process holds the write lock for 300 ms right after the side effect: the step is recorded, never done twice (leaseMs ${leaseMs})`, async () => {
    const path = tempDb();
    const store = new SqliteStore({ path, busyTimeoutMs: 20 });
    await store.ready();
    const locker = spawn('python3', ['-c', [
      'import sqlite3, sys, time',
      `c = sqlite3.connect(${JSON.stringify(path)}, isolation_level=None)`,
      'sys.stdin.readline()',
      "c.execute('BEGIN IMMEDIATE')",
      "print('LOCKED', flush=True)",
      'time.sleep(0.3)',
      "c.execute('ROLLBACK')",
    ].join('\n')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise((r) => locker.on('exit', r));
    let charges = 0;
    let failures = 1;
    const pay = idempotent(async function pay(order: string) {
      const charge = await step('charge', async () => {
        charges++;
        locker.stdin!.write('go\n');
        await lineFrom(locker, /LOCKED/); // the lock is taken right after the side effect
        return { order, charge: charges };
      });
      if (failures-- > 0) throw new Error('later trouble');
      return charge;
    }, { store, leaseMs, onDuplicate: 'block' });
    // The step's renewals fail while the lock is held too, but by this process's own record
    // of its claim the lease is held for 400 ms: its settle keeps trying until then (issue 28, item 6).
    await expect(pay('o-1')).rejects.toThrow(/later trouble/);
    await exited;
    expect(await pay('o-1')).toEqual({ order: 'o-1', charge: 1 });
    expect(charges).toBe(1);
    await store.close();
  });
});

describe('steps across an upgrade', () => {
  it('a step that 0.1.0 completed (keyed by the call key alone) is replayed, not done again', async () => {
    const native = require(join(ROOT, 'dist', 'core', 'native.js')) as typeof import('../dist/core/native.js');
    const store = new SqliteStore({ path: tempDb() });
    let charges = 0;
    const upgraded = idempotent(async function upgraded(order: string) {
      return step('charge', async () => `charged ${order} (${++charges})`);
    }, { store });
    const both = native.callHashes('upgraded.step', JSON.stringify({ step: upgraded.keyFor('o-1') }), JSON.stringify('charge'));
    const old = await store.acquire({ key: both.slice(64), name: 'upgraded.step("charge")', fingerprint: both.slice(0, 64), leaseMs: 60_000, force: false });
    if (!old.acquired) throw new Error('the legacy claim was refused');
    await store.complete({ key: both.slice(64), token: old.token, resultJson: '"charged o-1 before the upgrade"' });
    expect(await upgraded('o-1')).toBe('charged o-1 before the upgrade');
    expect(charges).toBe(0);
    await store.close();
  });
});
