// Steps' records expire with their call (issue 31 item 2): the conformance suite checks the
// rule on every store that has `expireSettled`; here, that every built-in store has it, and
// that an expired step record leaves the store as any expired record does (SQLite's prune,
// Redis's own expiry, Postgres's prune).

import { afterAll, describe, expect, it } from 'vitest';

import { lib, tempDb, testing } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';
import { redisCommand, sharedRedis, uniquePrefix } from './redis-server';

const redis = await sharedRedis();
afterAll(async () => {
  await redis.stop();
  await dropTables();
});

type AnyStore = InstanceType<typeof lib.SqliteStore> | InstanceType<typeof lib.RedisStore> | InstanceType<typeof lib.PostgresStore> | InstanceType<typeof testing.MemoryStore>;

const stores: Array<[string, () => { store: AnyStore; prefix?: string }]> = [
  ['SqliteStore', () => ({ store: new lib.SqliteStore({ path: tempDb() }) })],
  ['RedisStore', () => {
    const prefix = uniquePrefix();
    return { store: new lib.RedisStore({ url: redis.url, prefix }), prefix };
  }],
  // No background prune: the test's own prune counts what expired.
  ['PostgresStore', () => ({ store: new lib.PostgresStore({ url: PG_URL, table: uniqueTable(), pruneIntervalMs: 0 }) })],
  ['MemoryStore', () => ({ store: new testing.MemoryStore() })],
];

async function clockPast(epochMs: number): Promise<void> {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, Math.max(1, epochMs - Date.now() + 1)));
}

for (const [name, open] of stores) {
  describe(`steps expire with their completed call: ${name}`, () => {
    it('has expireSettled; a step record gets its call\'s expiry only once the call completed, then leaves the store', async () => {
      const { store, prefix } = open();
      try {
        expect(store.expireSettled).toBeTypeOf('function');
        let runs = 0;
        const ship = lib.idempotent(async function ship(order: string) {
          runs++;
          await lib.step('label', async () => `label for ${order}`);
          if (runs === 1) throw new Error('the carrier is down');
          return `shipped ${order}`;
        }, { store, ttlMs: 300 });
        await expect(ship('o-1')).rejects.toThrow(/carrier is down/);
        const [stepRecord] = (await store.listRecords()).filter((r) => r.name === 'ship.step("label")');
        expect(stepRecord.expiresAt).toBeNull(); // its call is unfinished: kept, however long
        expect(await ship('o-1')).toBe('shipped o-1');
        const call = (await store.get(ship.keyFor('o-1')))!;
        expect(call.expiresAt).not.toBeNull();
        expect((await store.get(stepRecord.key))?.expiresAt).toBe(call.expiresAt);
        await clockPast(call.expiresAt!);
        expect(await store.get(stepRecord.key)).toBeNull();
        if (prefix !== undefined) {
          // Redis deletes it by itself (PXAT): poll the server until the key is gone.
          while ((await redisCommand(Number(new URL(redis.url).port), `EXISTS ${prefix}${stepRecord.key}`)) !== ':0') {
            await new Promise((r) => setTimeout(r, 20));
          }
        } else {
          expect(await store.prune!()).toBe(2); // the call's record and its step's
        }
      } finally {
        await store.close();
      }
    });
  });
}
