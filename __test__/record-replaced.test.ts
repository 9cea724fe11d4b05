// A record lost while its owner ran (cleared, a Redis restart without persistence, a key
// that expired) and claimed again by another call, which completed first: the owner's
// settle must not take that other claim's record for its own. Both claims are the key's
// first (attempts 1) and of the same arguments (one fingerprint), so only the outcome in
// the record tells them apart. The owner's caller gets LeaseLostError with its own run's
// result, never its own result as if it were the recorded one.
//
// Found by the fault campaign (redis, seed 81001): a settle refused at its first attempt
// read the other claim's completed record, took it for its own (same attempts, same
// fingerprint), and its caller got a result that was not recorded.

import { afterAll, describe, expect, it } from 'vitest';

import { lib } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';
import { eachStore } from './stores';

const { idempotent, LeaseLostError } = lib;
const redis = await sharedRedis();
afterAll(() => redis.stop());

type Store = import('../dist/core/store.js').Store;

/**
 * `store`, except that once `failNext()` was called, the next `complete` fails before it
 * reaches the store (nothing applied).
 */
function completeFailingOnce(store: Store): { store: Store; failNext: () => void } {
  let armed = false;
  const wrapped = new Proxy(store, {
    get(target, property) {
      if (property === 'complete') {
        return async (req: Parameters<Store['complete']>[0]) => {
          if (armed) {
            armed = false;
            throw new Error('complete: the connection was reset before the request was sent (a fault of the test)');
          }
          return target.complete(req);
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: wrapped, failNext: () => (armed = true) };
}

for (const [storeName, open] of eachStore(redis.url, uniquePrefix)) {
  describe(`a record lost and claimed again while its owner ran: ${storeName}`, () => {
    for (const how of ['refused', 'failed first'] as const) {
      it(`the owner's settle ${how === 'refused' ? 'is refused' : 'fails once, then reads the record'}: LeaseLostError with its own result, never its result as the recorded one`, async () => {
        const [store] = open(1);
        let runs = 0;
        const faulty = completeFailingOnce(store);
        const pay = idempotent(async function charge(order: string): Promise<{ order: string; run: number }> {
          const run = ++runs;
          if (run === 1) {
            // The record goes away, and another caller claims the key afresh and completes.
            expect(await store.clear(pay.keyFor(order))).toBe(1);
            expect(await pay(order)).toEqual({ order, run: 2 });
            if (how === 'failed first') faulty.failNext();
          }
          return { order, run };
        }, { store: faulty.store, onDuplicate: 'raise' });

        const err = await pay('o-1').then(() => undefined, (e: unknown) => e);
        expect(err).toBeInstanceOf(LeaseLostError);
        expect((err as InstanceType<typeof LeaseLostError>).result).toEqual({ order: 'o-1', run: 1 });
        expect(await store.get(pay.keyFor('o-1'))).toMatchObject({ status: 'completed', attempts: 1, result: { order: 'o-1', run: 2 } });
        expect(await pay('o-1')).toEqual({ order: 'o-1', run: 2 });
        expect(runs).toBe(2);
        await store.close();
      });
    }

    it('the other claim recorded the very same result: returned, as the recorded one it equals', async () => {
      const [store] = open(1);
      let runs = 0;
      const faulty = completeFailingOnce(store);
      const pay = idempotent(async function charge(order: string): Promise<{ order: string; ok: boolean }> {
        if (++runs === 1) {
          expect(await store.clear(pay.keyFor(order))).toBe(1);
          expect(await pay(order)).toEqual({ order, ok: true });
          faulty.failNext();
        }
        return { ok: true, order }; // the same value, its keys in another order
      }, { store: faulty.store, onDuplicate: 'raise' });
      expect(await pay('o-2')).toEqual({ order: 'o-2', ok: true });
      expect(runs).toBe(2);
      await store.close();
    });
  });
}
