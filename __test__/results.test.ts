// The result rule: whatever the wrapper accepts as a result or an error, the store keeps
// and gives back exactly; anything else is decided before the write, as the "completed,
// unstorable" TypeError. Never a StoreError after fn ran, never fn run twice.

import { afterAll, describe, expect, it } from 'vitest';

import { lib, tempDb } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const { idempotent, SqliteStore, RedisStore, StoreError } = lib;
const redis = await sharedRedis();
afterAll(() => redis.stop());

type AnyStore = InstanceType<typeof SqliteStore> | InstanceType<typeof RedisStore>;
const stores: Array<[string, () => AnyStore]> = [
  ['SqliteStore', () => new SqliteStore({ path: tempDb() })],
  ['RedisStore', () => new RedisStore({ url: redis.url, prefix: uniquePrefix() })],
];

function nested(levels: number): unknown {
  let value: unknown = 'core';
  for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { level: value };
  return value;
}

/** Calls `f` three times, as a retrying agent would; returns what each call gave. */
async function threeCalls(f: () => Promise<unknown>) {
  const outcomes: Array<{ value?: unknown; error?: unknown }> = [];
  for (let i = 0; i < 3; i++) {
    try {
      outcomes.push({ value: await f() });
    } catch (error) {
      outcomes.push({ error });
    }
  }
  return outcomes;
}

for (const [storeName, open] of stores) {
  describe(`results on ${storeName}`, () => {
    it('a string cut in the middle of an emoji (a lone surrogate) is kept and replayed exactly; fn runs once', async () => {
      const store = open();
      const text = 'ok 😀 fine'.slice(0, 4); // 'ok \uD83D'
      let runs = 0;
      const summarize = idempotent(async function summarize(doc: string) {
        runs++;
        return { summary: text, doc, nested: [{ t: text }] };
      }, { store });
      const outcomes = await threeCalls(() => summarize('d1'));
      expect(runs).toBe(1);
      for (const o of outcomes) expect(o.value).toEqual({ summary: text, doc: 'd1', nested: [{ t: text }] });
      expect((await store.get(summarize.keyFor('d1')))?.result).toEqual({ summary: text, doc: 'd1', nested: [{ t: text }] });
      await store.close();
    });

    it('a replay gives back the first call\'s JSON text, key order included', async () => {
      const store = open();
      const quote = idempotent(async function quote(sku: string) {
        return { sku, price: 12.5, id: 'q_1', lines: [{ z: 1, a: 2, m: { y: 0, b: 1 } }] };
      }, { store });
      const first = await quote('s-1');
      const replay = await quote('s-1');
      expect(JSON.stringify(replay)).toBe(JSON.stringify(first));
      expect(JSON.stringify(replay)).toBe('{"sku":"s-1","price":12.5,"id":"q_1","lines":[{"z":1,"a":2,"m":{"y":0,"b":1}}]}');
      await store.close();
    });

    it('a result at the nesting limit is kept exactly', async () => {
      const store = open();
      const deep = nested(100);
      let runs = 0;
      const f = idempotent(async function atLimit() {
        runs++;
        return deep;
      }, { store });
      const outcomes = await threeCalls(() => f());
      expect(runs).toBe(1);
      for (const o of outcomes) expect(o.value).toEqual(deep);
      await store.close();
    });

    for (const levels of [101, 128, 129, 1000]) {
      it(`a result nested ${levels} levels: completed, unstorable TypeError now and on replays; fn runs once; never StoreError`, async () => {
        const store = open();
        let runs = 0;
        const f = idempotent(async function tooDeep() {
          runs++;
          return nested(levels);
        }, { store });
        const outcomes = await threeCalls(() => f());
        expect(runs).toBe(1);
        for (const o of outcomes) {
          expect(o.error).toBeInstanceOf(TypeError);
          expect(o.error).not.toBeInstanceOf(StoreError);
          expect((o.error as Error).message).toMatch(/nested more than 100 levels/);
        }
        expect((await store.get(f.keyFor()))?.status).toBe('completed');
        await store.close();
      });
    }
  });
}
