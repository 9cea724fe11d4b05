// MemoryStore (idempotent-tools/testing), the store for unit tests of code that uses the
// package, holds the same protocol as the built-in stores: the whole conformance suite.

import { describe, expect, it } from 'vitest';

import { lib, tempDb, testing } from './helpers';

const { MemoryStore } = testing;

testing.storeConformance({ describe, it }, {
  name: 'MemoryStore',
  makeStore: () => new MemoryStore(),
  openSecondHandle: (store) => new MemoryStore({ sharedWith: store as InstanceType<typeof MemoryStore> }),
});

describe('MemoryStore leases', () => {
  it('once the wall clock is past a pending record\'s leaseExpiresAt, its lease is over (the monotonic deadline never lags the shown one)', async () => {
    const store = new MemoryStore();
    let refused = 0;
    for (let i = 0; i < 1000; i++) {
      const key = `k${i}`;
      await store.acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: 1, force: false });
      const shown = (await store.get(key))!.leaseExpiresAt!;
      while (Date.now() <= shown) await new Promise((r) => setTimeout(r, 1)); // the clock passing the shown expiry
      if (!(await store.acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: 60_000, force: false })).acquired) refused++;
    }
    expect(refused).toBe(0);
  });
});

describe('release options', () => {
  it('a typo or a value that is not true or false is a TypeError, never a release the other way', async () => {
    for (const store of [new MemoryStore(), new lib.SqliteStore({ path: tempDb() })]) {
      await store.acquire({ key: 'k', name: 'op', fingerprint: 'fp', leaseMs: 60_000, force: false });
      await expect(store.release('k', { reconcile: 'no' } as never)).rejects.toThrow(/reconcile must be true or false, not "no"/);
      await expect(store.release('k', { reconsile: false } as never)).rejects.toThrow(/unknown option "reconsile"; the only option is reconcile/);
      await expect(store.release('k', null as never)).rejects.toThrow(TypeError);
      expect((await store.get('k'))?.leaseExpiresAt).toBeGreaterThan(Date.now()); // untouched
      await store.close();
    }
  });
});
