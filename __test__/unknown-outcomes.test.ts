// A settle whose outcome is unknown (the write applied, its reply lost with the connection,
// and reading the record back failed too) must say so: never "not recorded" when it was,
// never a LeaseLostError ("another call took it over") that nobody saw (issue 28, item 5).
// A caller that compensates on a loss it was told of would act wrongly.

import { afterAll, describe, expect, it } from 'vitest';

import { lib } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';
import { repliesLost, settleRepliesLost } from './store-faults';
import { eachStore } from './stores';

const { idempotent, step, StoreError } = lib;
const LEASE_MS = 300;
const redis = await sharedRedis();
afterAll(() => redis.stop());

for (const [storeName, open] of eachStore(redis.url, uniquePrefix)) {
  describe(`a settle whose outcome nobody could see: ${storeName}`, () => {
    it('the call says the outcome is unknown (outcome: "unknown"), never that it was lost; the record is completed, and the next call replays it', async () => {
      const [store] = open(1);
      let faulty = false;
      let runs = 0;
      const pay = idempotent(async function pay(order: string) {
        runs += 1;
        faulty = true; // the connection dies from here on, until the test heals it
        return { order, charge: `ch_${runs}` };
      }, { store: settleRepliesLost(store, () => faulty), leaseMs: LEASE_MS });
      const err = await pay('o-1').then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(StoreError);
      const { message, outcome } = err as InstanceType<typeof StoreError>;
      expect(outcome).toBe('unknown');
      expect(message).toMatch(/whether its result was recorded is unknown/);
      expect(message).not.toMatch(/could not be recorded|was not recorded|\. The record stays pending/);
      faulty = false;
      expect(await store.get(pay.keyFor('o-1'))).toMatchObject({ status: 'completed', result: { order: 'o-1', charge: 'ch_1' } });
      expect(await pay('o-1')).toEqual({ order: 'o-1', charge: 'ch_1' });
      expect(runs).toBe(1);
      await store.close();
    });

    it('a settle whose first reply was lost and whose resend is refused, with the record unreadable: unknown, never LeaseLostError', async () => {
      const [store] = open(1);
      let faulty = false;
      let completes = 0;
      const pay = idempotent(async function pay(order: string) {
        faulty = true;
        return { order };
      }, {
        // The first complete is applied and its reply lost; the store answers the resend as it
        // answers a settle of a claim already settled (some stores recognise it, some refuse).
        store: repliesLost(store, { complete: () => faulty && ++completes === 1, get: () => faulty, renew: () => faulty }),
        leaseMs: LEASE_MS,
      });
      const outcome = await pay('o-2').then((v) => v, (e: unknown) => e);
      if (outcome instanceof Error) {
        expect(outcome).toBeInstanceOf(StoreError);
        expect((outcome as InstanceType<typeof StoreError>).outcome).toBe('unknown');
      } else {
        expect(outcome).toEqual({ order: 'o-2' });
      }
      faulty = false;
      expect(await store.get(pay.keyFor('o-2'))).toMatchObject({ status: 'completed', result: { order: 'o-2' } });
      await store.close();
    });

    it('a renewal refused while the settle is unconfirmed is no takeover: its own write, applied, ended the claim (unknown, never LeaseLostError)', async () => {
      // Found by the fault campaign (postgres, seed 20261207): the complete committed and its
      // reply was cut; the lease's next renewal reached the store, which refused it because
      // the record was no longer pending; the read-back failed; the call said "another call
      // took it over", and the store held this very run's result.
      const [store] = open(1);
      let faulty = false;
      let renewalsRefused = 0;
      const events: string[] = [];
      const faultyStore = repliesLost(store, { complete: () => faulty, get: () => faulty, renew: () => false });
      const pay = idempotent(async function pay(order: string) {
        faulty = true;
        return { order };
      }, {
        store: new Proxy(faultyStore, {
          get(target, property) {
            if (property !== 'renew') return Reflect.get(target, property, target);
            return async (key: string, token: string, leaseMs: number) => {
              const held = await target.renew!(key, token, leaseMs);
              if (!held && leaseMs > 0) renewalsRefused += 1;
              return held;
            };
          },
        }),
        leaseMs: LEASE_MS,
        onEvent: (e) => events.push(e.type),
      });
      const err = await pay('o-3').then(() => undefined, (e: unknown) => e);
      expect(renewalsRefused).toBeGreaterThan(0); // the case this test is about happened
      expect(err).toBeInstanceOf(StoreError);
      const { message, outcome } = err as InstanceType<typeof StoreError>;
      expect(outcome).toBe('unknown');
      expect(message).toMatch(/renewal of its lease was refused meanwhile/i);
      expect(events).not.toContain('lease-lost'); // nor an event that says another call took it over
      faulty = false;
      expect(await store.get(pay.keyFor('o-3'))).toMatchObject({ status: 'completed', result: { order: 'o-3' } });
      await store.close();
    });

    it('a step whose settle is unconfirmed while its lease\'s renewals are refused says the same: unknown, never LeaseLostError', async () => {
      // The two features together: step() and a renewal refused because the step's own
      // write, applied with its reply lost, ended the step's claim.
      const [store] = open(1);
      let faulty = false;
      let sent = 0;
      const call = idempotent(async function mailer(to: string) {
        return step('mail', async () => {
          sent += 1;
          faulty = true;
          return `mail-${sent}`;
        });
      }, { store: repliesLost(store, { complete: () => faulty, get: () => faulty, renew: () => false }), leaseMs: LEASE_MS });
      const err = await call('ada').then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(StoreError);
      expect((err as InstanceType<typeof StoreError>).outcome).toBe('unknown');
      expect((err as Error).message).toMatch(/step .* ran, but whether its result was recorded is unknown/);
      expect((err as Error).message).toMatch(/renewal of its lease was refused meanwhile/i);
      faulty = false;
      expect(sent).toBe(1);
      await store.close();
    });

    it('a step says the same', async () => {
      const [store] = open(1);
      let faulty = false;
      let sent = 0;
      const call = idempotent(async function mailer(to: string) {
        return step('mail', async () => {
          sent += 1;
          faulty = true;
          return `mail-${sent}`;
        });
      }, { store: settleRepliesLost(store, () => faulty), leaseMs: LEASE_MS });
      const err = await call('ada').then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(StoreError);
      expect((err as InstanceType<typeof StoreError>).outcome).toBe('unknown');
      expect((err as Error).message).toMatch(/step .* ran, but whether its result was recorded is unknown/);
      faulty = false;
      expect(sent).toBe(1);
      await store.close();
    });
  });
}

describe('idempotentTx: a COMMIT whose reply was lost, and the record unreadable', () => {
  it('says whether it committed is unknown (it did: the next call replays), never that nothing was recorded', async () => {
    const { join } = await import('node:path');
    const { Pool } = await import('pg');
    const { ROOT } = await import('./helpers');
    const { PG_URL, dropTables, sql, uniqueTable } = await import('./postgres-server');
    const { idempotentTx } = require(join(ROOT, 'dist', 'pg.js')) as typeof import('../dist/pg.js');
    const real = new Pool({ connectionString: PG_URL, max: 4 });
    const orders = uniqueTable();
    await sql(`CREATE TABLE "${orders}" (id text)`);
    let faulty = false;
    const lost = () => new Error('Connection terminated unexpectedly (a fault of the test)');
    // The user's pool, as a connection that dies at COMMIT would show it: the COMMIT is
    // applied on the server, its reply never arrives, and reads through the pool fail.
    const pool = new Proxy(real, {
      get(target, property) {
        if (property === 'query') {
          return (...args: unknown[]) => (faulty ? Promise.reject(lost()) : (target.query as (...a: unknown[]) => unknown)(...args));
        }
        if (property === 'connect') {
          return async () => {
            const client = await target.connect();
            return new Proxy(client, {
              get(c, p) {
                if (p === 'query') {
                  return async (...args: unknown[]) => {
                    const result = await (c.query as (...a: unknown[]) => Promise<unknown>)(...args);
                    if (args[0] === 'COMMIT' && faulty) throw lost();
                    return result;
                  };
                }
                const v = Reflect.get(c, p, c);
                return typeof v === 'function' ? v.bind(c) : v;
              },
            });
          };
        }
        const v = Reflect.get(target, property, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    let runs = 0;
    const addOrder = idempotentTx(async function addOrder(client: import('pg').PoolClient, id: string) {
      runs++;
      await client.query(`INSERT INTO "${orders}" (id) VALUES ($1)`, [id]);
      faulty = true;
      return { id };
    }, { pool: pool as typeof real, table: uniqueTable(), leaseMs: LEASE_MS });
    const err = await addOrder('o-1').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as InstanceType<typeof StoreError>).outcome).toBe('unknown');
    expect((err as Error).message).toMatch(/whether it committed is unknown/);
    expect((err as Error).message).not.toMatch(/did not commit|nothing was recorded/);
    faulty = false;
    expect(await addOrder('o-1')).toEqual({ id: 'o-1' });
    expect(runs).toBe(1);
    expect(Number((await sql(`SELECT count(*) AS n FROM "${orders}"`)).rows[0].n)).toBe(1);
    await real.end();
    await dropTables();
  });
});
