// step(label, fn): a side effect inside a wrapped call, remembered under the call's key
// and the label, on real stores (SQLite files, a real redis-server).

import { afterAll, describe, expect, it } from 'vitest';

import { lib, tempDb } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const { idempotent, step, currentKey, SqliteStore, RedisStore } = lib;
type Store = InstanceType<typeof SqliteStore>;

const redis = sharedRedis();
afterAll(async () => (await redis).stop());

const stores: Array<[string, () => Promise<Store>]> = [
  ['sqlite', async () => new SqliteStore({ path: tempDb() })],
  ['redis', async () => new RedisStore({ url: (await redis).url, prefix: uniquePrefix() }) as unknown as Store],
];

describe.each(stores)('step() on %s', (_kind, open) => {
  it('a call re-run from the top replays the steps it already did, and runs the ones it did not', async () => {
    const store = await open();
    const charges: string[] = [];
    let failAfterFirst = true;
    const order = idempotent(async function order(id: string) {
      const a = await step('charge', async () => {
        charges.push(`charge ${id}`);
        return { chargeId: `ch-${charges.length}` };
      });
      if (failAfterFirst) throw new Error('shipping service down'); // a failure after the side effect
      const b = await step('ship', async () => {
        charges.push(`ship ${id}`);
        return `sh-${charges.length}`;
      });
      return { ...a, shipment: b };
    }, { store });

    await expect(order('o-1')).rejects.toThrow('shipping service down');
    failAfterFirst = false;
    expect(await order('o-1')).toEqual({ chargeId: 'ch-1', shipment: 'sh-2' });
    expect(charges).toEqual(['charge o-1', 'ship o-1']);
    // Another call (other arguments) has its own steps.
    expect(await order('o-2')).toEqual({ chargeId: 'ch-3', shipment: 'sh-4' });
    await store.close();
  });

  it('a failed step runs again on the next run; undefined is kept; an unstorable result is a TypeError for good', async () => {
    const store = await open();
    let runs = 0;
    let stepRuns = 0;
    const f = idempotent(async function f() {
      runs++;
      const none = await step('nothing', () => {
        stepRuns++;
        return undefined;
      });
      expect(none).toBeUndefined();
      await step('flaky', () => {
        if (runs === 1) throw new Error('flaky');
        return 1;
      });
      return step('weird', () => new Map([[1, 2]]));
    }, { store });
    await expect(f()).rejects.toThrow('flaky');
    await expect(f()).rejects.toThrow(/step f\.step\("weird"\) ran, but its result cannot be stored.*will not run again/);
    await expect(f()).rejects.toThrow(/cannot be stored/);
    expect(stepRuns).toBe(1);
    expect(runs).toBe(3);
    await store.close();
  });

  it('two runs of one call at once (onDuplicate "retry") share each step: it runs once', async () => {
    const store = await open();
    let stepRuns = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let reached = 0;
    let bothReached!: () => void;
    const both = new Promise<void>((r) => (bothReached = r));
    const f = idempotent(async function twice() {
      if (++reached === 2) bothReached();
      return step('charge', async () => {
        stepRuns++;
        await gate;
        return 'ch-1';
      });
    }, { store, onDuplicate: 'retry', leaseMs: 5000 });
    const runs = Promise.allSettled([f(), f()]);
    await both;
    release();
    // Both claimed the record ('retry'); the one that claimed last owns it. Each gets the
    // step's one result (the other's own result may be refused by the core as lease-lost).
    const settled = await runs;
    const values = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(values.length).toBeGreaterThan(0);
    expect(values.every((v) => v === 'ch-1')).toBe(true);
    for (const r of settled) if (r.status === 'rejected') expect((r.reason as { code?: string }).code).toBe('LEASE_LOST');
    expect(stepRuns).toBe(1);
    await store.close();
  });

  it('inside a step, currentKey() is the step\'s own key: distinct per label and per call', async () => {
    const store = await open();
    const keys: string[] = [];
    const f = idempotent(async function f(_n: number) {
      const outer = currentKey()!;
      keys.push(outer, await step('a', () => currentKey()!), await step('b', () => currentKey()!));
      return null;
    }, { store });
    await f(1);
    await f(2);
    expect(new Set(keys).size).toBe(6);
    await store.close();
  });
});

describe('step() misuse: clear errors', () => {
  it('outside a wrapped call is a TypeError, and fn does not run', async () => {
    let ran = false;
    await expect(step('x', () => (ran = true))).rejects.toThrow(TypeError);
    await expect(step('x', () => (ran = true))).rejects.toThrow(/outside a running wrapped function.*idempotent\(\)/s);
    expect(ran).toBe(false);
  });

  it('bad labels and a label used twice in one run are TypeErrors', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const g = idempotent(async function g(which: string) {
      if (which === 'empty') return step('', () => 1);
      if (which === 'surrogate') return step('a\uD800', () => 1);
      if (which === 'fn') return step('x', 42 as never);
      await step('same', () => 1);
      return step('same', () => 2);
    }, { store });
    await expect(g('empty')).rejects.toThrow(/label must be a non-empty string/);
    await expect(g('surrogate')).rejects.toThrow(/lone UTF-16 surrogate/);
    await expect(g('fn')).rejects.toThrow(/fn must be a function/);
    await expect(g('twice')).rejects.toThrow(/"same" was used twice in one run of "g".*own label/s);
  });
});
