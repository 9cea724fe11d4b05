// Issue 40 item 3: Redis and Postgres answer `listRecent` (inspect, the page, stats'
// key-id lookup) in their native half, holding at most the records asked for, where
// before they read every record with its result into Node (listRecentFallback over
// listRecords). Each store's own answer must be the fallback's, filters, limit and all.

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';

const require = createRequire(import.meta.url);
const query: typeof import('../dist/core/record-query.js') = require(join(ROOT, 'dist', 'core', 'record-query.js'));
type Store = import('../dist/core/store.js').Store;
type RecentQuery = import('../dist/core/store.js').RecentQuery;

afterAll(() => dropTables());

const stores: Array<[string, () => Promise<Store>]> = [
  ['Redis', async () => new lib.RedisStore({ url: (await sharedRedis()).url, prefix: uniquePrefix() })],
  ['Postgres', async () => new lib.PostgresStore({ url: PG_URL, table: uniqueTable(), pruneIntervalMs: 0 })],
];

describe.each(stores)('%s listRecent in the store (issue 40 item 3)', (_, open) => {
  it('gives what the fallback over every record gives, and never lists every record', async () => {
    const store = await open();
    try {
      const charge = lib.idempotent(async function charge(n: number) {
        if (n % 5 === 0) throw new Error('declined');
        return { charged: n };
      }, { store });
      const refund = lib.idempotent(async function refund(n: number) {
        return { refunded: n };
      }, { store });
      for (let n = 1; n <= 12; n++) {
        await charge(n).catch(() => {});
        if (n % 3 === 0) await refund(n);
      }
      await store.acquire({ key: 'stuck', name: 'charge', fingerprint: 'fp', leaseMs: 600_000, force: false });
      const middle = (await store.get(charge.keyFor(6)))!.updatedAt;
      const queries: RecentQuery[] = [
        {},
        { limit: 3 },
        { limit: 0 },
        { name: 'charge', limit: 4 },
        { status: 'failed' },
        { status: 'pending', name: 'charge' },
        { updatedSince: middle, limit: 5 },
        { name: 'refund', withResults: true },
        { name: 'nothing' },
      ];
      const fallback = await Promise.all(queries.map((q) => query.listRecentFallback(store, q)));
      // From here on, a read of every record is a failure: the store's own query must answer.
      store.listRecords = () => Promise.reject(new Error('listRecords read every record'));
      for (const [i, q] of queries.entries()) {
        const own = await store.listRecent!(q);
        expect(own.matched, JSON.stringify(q)).toBe(fallback[i].matched);
        expect(own.records.map((r) => r.key), JSON.stringify(q)).toEqual(fallback[i].records.map((r) => r.key));
        expect(own.records.map((r) => r.result), JSON.stringify(q)).toEqual(fallback[i].records.map((r) => r.result));
      }
      // What inspect --limit and stats ask for, without any full read.
      const shown = await query.queryRecords(store, { limit: 2 }, Date.now(), { withResults: false });
      expect(shown.records).toHaveLength(2);
      expect(shown.matched).toBe(fallback[0].matched);
      expect((await query.keyIdSecrets(store)).size).toBe(0);
    } finally {
      await store.close();
    }
  });
});
