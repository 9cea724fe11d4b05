// The meta option: checked at wrap time, its answer checked at the call (before fn runs).

import { afterAll, describe, expect, it } from 'vitest';

import { lib, tempDb } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const { idempotent, SqliteStore, RedisStore } = lib;
const redis = await sharedRedis();
afterAll(() => redis.stop());

describe('the meta option', () => {
  it('must be a function (wrap time)', () => {
    expect(() => idempotent(async function m1() {}, { meta: { scope: 'x' } as never })).toThrow(/option "meta" must be a function/);
  });

  it('an answer that is not an object is a TypeError before fn runs; undefined is fine', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let runs = 0;
    const bad = idempotent(async function m2() {
      runs++;
    }, { store, meta: () => 'thread-1' as never });
    await expect(bad()).rejects.toThrow(/"meta" option of "m2" must return an object/);
    expect(runs).toBe(0);
    const none = idempotent(async function m3() {
      runs++;
      return 1;
    }, { store, meta: () => undefined });
    expect(await none()).toBe(1);
    const given = idempotent(async function m4(thread: string) {
      runs++;
      return thread;
    }, { store, meta: (thread) => ({ scope: thread, framework: 'test' }) });
    expect(await given('t-1')).toBe('t-1');
    expect(runs).toBe(2);
    await store.close();
  });

  it('reaches the record with durationMs on complete and on fail (SQLite keeps both)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const ok = idempotent(async function m5(thread: string) {
      return thread;
    }, { store, meta: (thread) => ({ scope: thread, toolCallId: 'call_1' }) });
    const bad = idempotent(async function m6() {
      throw new Error('no');
    }, { store });
    await ok('t-9');
    await expect(bad()).rejects.toThrow('no');
    const done = await store.get(ok.keyFor('t-9'));
    expect(done?.meta).toMatchObject({ scope: 't-9', toolCallId: 'call_1' });
    expect(done?.durationMs).toEqual(expect.any(Number));
    expect((await store.get(bad.keyFor()))?.durationMs).toEqual(expect.any(Number));
    await store.close();
  });

  it('reaches the record with durationMs on complete and on fail (Redis keeps both; failed before: meta and durationMs were null)', async () => {
    const store = new RedisStore({ url: redis.url, prefix: uniquePrefix() });
    const ok = idempotent(async function m7(thread: string) {
      return thread;
    }, { store, meta: (thread) => ({ scope: thread, toolCallId: 'call_2', framework: 'test' }) });
    const bad = idempotent(async function m8() {
      throw new Error('no');
    }, { store, meta: () => ({ scope: 't-bad' }) });
    await ok('t-10');
    await expect(bad()).rejects.toThrow('no');
    const done = await store.get(ok.keyFor('t-10'));
    expect(done?.meta).toEqual({ scope: 't-10', toolCallId: 'call_2', framework: 'test' });
    expect(done?.durationMs).toEqual(expect.any(Number));
    const failed = await store.get(bad.keyFor());
    expect(failed?.meta).toEqual({ scope: 't-bad' });
    expect(failed?.durationMs).toEqual(expect.any(Number));
    const [listed] = (await store.listRecords()).filter((r) => r.key === ok.keyFor('t-10'));
    expect(listed.meta?.scope).toBe('t-10');
    await store.clear();
    await store.close();
  });
});
