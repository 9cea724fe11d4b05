// The crash window's reconcile step, with a real crash: a child process charges (one
// line in an append-only log, the "provider") and is SIGKILLed before its record. The
// next call after the lease asks reconcile, which finds the charge at the provider; the
// charge count stays 1.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, tempDb, tempDir, testHooks } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';
import { afterTheOwner } from './stores';

const { idempotent, SqliteStore, RedisStore } = lib;
const WORKER = join(ROOT, '__test__', 'fixtures', 'worker.js');
const LEASE_MS = 1500;
const redis = await sharedRedis();
afterAll(() => redis.stop());

type Where = { db: string } | { redis: string; prefix: string };
const places: Array<[string, () => Where]> = [
  ['SqliteStore', () => ({ db: tempDb() })],
  ['RedisStore', () => ({ redis: redis.url, prefix: uniquePrefix() })],
];

/** The provider's charges for a key: the lines the log holds. */
function charges(log: string, key: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter((l) => l.startsWith(`${key} `)) : [];
}

async function crashAfterCharge(where: Where, log: string, key: string) {
  const child = spawn(process.execPath, [WORKER, 'once', JSON.stringify({ ...where, log, key, leaseMs: LEASE_MS })], {
    cwd: ROOT,
    env: { ...process.env, ...testHooks({ IDEMPOTENT_TOOLS_FAULT: 'after-fn' }) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const died = await collect(child);
  expect(died.signal, died.stderr).toBe('SIGKILL');
  expect(charges(log, key)).toHaveLength(1);
}

const open = (where: Where) =>
  'db' in where ? new SqliteStore({ path: where.db }) : new RedisStore({ url: where.redis, prefix: where.prefix });

for (const [storeName, place] of places) {
  describe(`reconcile after a SIGKILL between the charge and its record: ${storeName}`, () => {
    it('the next call asks reconcile, gets the charge back, and the charge count stays 1', async () => {
      const where = place();
      const log = join(tempDir(), 'charges.log');
      const key = 'charge-1';
      await crashAfterCharge(where, log, key);

      const store = open(where);
      const asked: unknown[] = [];
      const events: string[] = [];
      let runs = 0;
      const tool = idempotent(async function tool(k: string) {
        runs++;
        return { key: k, by: 'parent' };
      }, {
        store,
        leaseMs: LEASE_MS,
        onEvent: (e) => events.push(e.type),
        reconcile: async (attempt) => {
          asked.push({ ...attempt, current: lib.currentKey() });
          const found = charges(log, attempt.key);
          if (found.length === 0) return { happened: false };
          return { happened: true, result: { key: attempt.key, by: Number(found[0].split(' ')[1]), reconciled: true } };
        },
      });
      const first = await afterTheOwner(() => tool.withKey(key)(key));
      expect(first).toMatchObject({ key, reconciled: true });
      expect(asked).toEqual([{ key, name: 'tool', args: [key], attempts: 2, current: key }]);
      expect(events).toContain('reconciled');
      expect(runs).toBe(0);
      expect(charges(log, key)).toHaveLength(1);
      const record = await store.get(key);
      expect(record?.status).toBe('completed');
      expect(record?.result).toEqual(first);
      // From here on a replay: reconcile is not asked again, fn never runs.
      expect(await tool.withKey(key)(key)).toEqual(first);
      expect(asked).toHaveLength(1);
      expect(runs).toBe(0);
      await store.close();
    });

    it('reconcile throwing: the call throws that, fn does not run, and the next call asks again; { happened: false } runs fn', async () => {
      const where = place();
      const log = join(tempDir(), 'charges.log');
      const key = 'charge-2';
      await crashAfterCharge(where, log, key);

      const store = open(where);
      const providerDown = new Error('provider unreachable');
      const answers: Array<() => unknown> = [
        () => {
          throw providerDown;
        },
        () => ({ happened: 'maybe' }),
        () => ({ happened: false }),
      ];
      let asked = 0;
      let runs = 0;
      const tool = idempotent(async function tool(k: string) {
        runs++;
        return { key: k, by: 'parent' };
      }, {
        store,
        leaseMs: LEASE_MS,
        reconcile: async () => answers[asked++]() as { happened: false },
      });
      await expect(afterTheOwner(() => tool.withKey(key)(key))).rejects.toBe(providerDown);
      expect(runs).toBe(0);
      expect((await store.get(key))?.status).toBe('pending');
      // Asked again at once (the claim was handed back), and a malformed answer is a TypeError.
      await expect(tool.withKey(key)(key)).rejects.toThrow(/"reconcile" option of "tool" must return/);
      expect(runs).toBe(0);
      expect(await tool.withKey(key)(key)).toEqual({ key, by: 'parent' });
      expect(asked).toBe(3);
      expect(runs).toBe(1);
      expect((await store.get(key))?.status).toBe('completed');
      await store.close();
    });
  });
}

describe('the reconcile option', () => {
  it('is checked at wrap time', () => {
    expect(() => idempotent(async function f() {}, { reconcile: 'yes' as never })).toThrow(/option "reconcile" must be a function/);
  });

  it('is not asked for a new key, a failed record or a retry of a live one', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let asked = 0;
    let runs = 0;
    const f = idempotent(async function f(n: number) {
      runs++;
      if (runs === 1) throw new Error('first fails');
      return n;
    }, { store, reconcile: async () => (asked++, { happened: false }) });
    await expect(f(1)).rejects.toThrow('first fails');
    expect(await f(1)).toBe(1);
    expect(asked).toBe(0);
    await store.close();
  });
});
