// A claim whose reply comes back after its lease ran out (a stalled network, a paused
// process or VM) must not run fn: meanwhile another caller may have taken the key over,
// run it and returned its result (issue 28, item 1). The lease counts from when the claim
// was sent; a late claim is handed back unused and the call reads the record again.
//
// The fault is made at the Store interface of a real store: the claim is made on the real
// store at once, and only its reply is held back (as a proxy holding the server's replies
// would), so every store and both Redis transports meet the same case.

import { afterAll, describe, expect, it } from 'vitest';

import { lib } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';
import { holdingReply } from './store-faults';
import { eachStore } from './stores';

const { idempotent, step } = lib;

const LEASE_MS = 300;
const redis = await sharedRedis();
afterAll(() => redis.stop());

const afterLeases = (n: number) => new Promise<void>((r) => setTimeout(r, n * LEASE_MS)); // the fault itself: a reply held this long

for (const [storeName, open] of eachStore(redis.url, uniquePrefix)) {
  describe(`a claim answered after its lease: ${storeName}`, () => {
    it('does not run fn when another caller took the key over meanwhile; it returns that caller\'s result', async () => {
      const [late, other] = open(2);
      let runs = 0;
      async function charge(order: string) {
        runs += 1;
        return { order, run: runs };
      }
      const held = holdingReply(late);
      const lateCall = idempotent(charge, { store: held.store, leaseMs: LEASE_MS, onDuplicate: 'block' })('o-1');
      await held.claimed;
      // The other caller waits for the late one's lease to run out on the store, takes over, runs.
      const first = await idempotent(charge, { store: other, leaseMs: LEASE_MS, onDuplicate: 'block', pollIntervalMs: 20 })('o-1');
      expect(first).toEqual({ order: 'o-1', run: 1 });
      held.release();
      expect(await lateCall).toEqual({ order: 'o-1', run: 1 });
      expect(runs).toBe(1);
      await Promise.all([late.close(), other.close()]);
    });

    it('hands a late claim back and claims again: fn runs once, and reconcile is not asked about its own unused claim', async () => {
      const [store] = open(1);
      let runs = 0;
      const reconciled: number[] = [];
      const held = holdingReply(store);
      const pay = idempotent(async function pay(order: string) {
        runs += 1;
        return { order, run: runs };
      }, { store: held.store, leaseMs: LEASE_MS, reconcile: async ({ attempts }) => (reconciled.push(attempts), { happened: false }) });
      const call = pay('o-2');
      await held.claimed;
      await afterLeases(3);
      held.release();
      expect(await call).toEqual({ order: 'o-2', run: 1 });
      expect(runs).toBe(1);
      expect(reconciled).toEqual([]);
      expect(await store.get(pay.keyFor('o-2'))).toMatchObject({ status: 'completed', attempts: 2 });
      await store.close();
    });

    it('a late takeover of a dead owner\'s claim still asks reconcile (once) before fn runs', async () => {
      const [store] = open(1);
      let owner = true;
      const fn = async function refund(order: string) {
        if (owner) throw Object.assign(new Error('the owner\'s request was cut off'), { name: 'AbortError' });
        return { order, refunded: true };
      };
      // A dead owner: its outcome unknown (an abort after fn started), its claim left pending.
      const abandoned = idempotent(fn, { store, leaseMs: LEASE_MS });
      await expect(abandoned('o-3')).rejects.toThrow(/cut off/);
      owner = false;
      await afterLeases(1.2);
      const reconciled: number[] = [];
      const held = holdingReply(store);
      const call = idempotent(fn, {
        store: held.store,
        leaseMs: LEASE_MS,
        reconcile: async ({ attempts }) => (reconciled.push(attempts), { happened: true, result: { order: 'o-3', refunded: 'found' } }),
      })('o-3');
      await held.claimed;
      await afterLeases(3);
      held.release();
      expect(await call).toEqual({ order: 'o-3', refunded: 'found' });
      expect(reconciled).toEqual([3]);
      await store.close();
    });

    it('a step whose claim is answered late does not run under it when another run of the call did the step meanwhile', async () => {
      const [store, other] = open(2);
      let sent = 0;
      async function order(id: string) {
        const mail = await step('mail', async () => ++sent);
        return { id, mail };
      }
      const held = holdingReply(store, (req) => req.name.includes('.step('));
      // 'retry': a second run of the call goes ahead while the first one still holds it.
      const firstRun = idempotent(order, { store: held.store, leaseMs: LEASE_MS, onDuplicate: 'retry' })('o-4').then(
        (value) => value,
        (err: Error) => err,
      );
      await held.claimed;
      // The second run finds the step claimed, waits for that lease to run out, and does the step.
      const second = await idempotent(order, { store: other, leaseMs: LEASE_MS, onDuplicate: 'retry' })('o-4');
      expect(second).toEqual({ id: 'o-4', mail: 1 });
      held.release();
      const first = await firstRun;
      // The first run's own settle is refused (the second run claimed the call): that is 'retry'.
      expect(first instanceof Error ? (first as { code?: string }).code : first).toBe('LEASE_LOST');
      expect(sent).toBe(1);
      await Promise.all([store.close(), other.close()]);
    });
  });
}

