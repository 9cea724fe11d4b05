// The README's way out of a stuck claim, as an operator meets it, on every store: a
// process charges (one line in an append-only log, the "provider") and is SIGKILLed
// before its record, holding a claim with a long lease. `idempotent-tools release --key K`
// (the real CLI) frees it; the next call takes the claim over and asks reconcile, which
// finds the charge: fn does not run, and the charge count stays 1. With --no-reconcile
// the record becomes failed and the next call runs fn without asking.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, runNode, tempDir } from './helpers';
import { dropTables } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';
import { type Where, openWhere, threeStores } from './stores';

const WORKER = join(ROOT, '__test__', 'fixtures', 'worker.js');
const CLI = join(ROOT, 'dist', 'cli.js');
const STUCK_LEASE_MS = 600_000; // without a release, the claim would hold for ten minutes
const redis = await sharedRedis();
afterAll(async () => {
  await redis.stop();
  await dropTables();
});

/** The CLI's flags that name the store. */
function storeFlags(where: Where): string[] {
  if ('db' in where) return ['--db', where.db];
  if ('redis' in where) return ['--redis', where.redis, '--prefix', where.prefix];
  return ['--postgres', where.postgres, '--table', where.table];
}

function charges(log: string, key: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter((l) => l.startsWith(`${key} `)) : [];
}

/** A worker charges under `key`, then hangs holding its claim, and is killed there. */
async function stuckAfterCharge(where: Where, log: string, key: string): Promise<void> {
  const child = spawn(process.execPath, [WORKER, 'hang', JSON.stringify({ ...where, log, key, leaseMs: STUCK_LEASE_MS })], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await lineFrom(child, /^RUNNING$/);
  const exited = new Promise((done) => child.once('close', done));
  child.kill('SIGKILL');
  await exited;
  expect(charges(log, key)).toHaveLength(1);
}

for (const [storeName, place] of threeStores(redis.url, uniquePrefix)) {
  describe(`release --key K on a claim stuck by a killed process: ${storeName}`, () => {
    it('the next call takes it over and asks reconcile, which finds the charge: fn does not run', async () => {
      const where = place();
      const log = join(tempDir(), 'charges.log');
      const key = 'order-42';
      await stuckAfterCharge(where, log, key);

      const store = openWhere(where);
      try {
        const asked: number[] = [];
        let runs = 0;
        const tool = lib.idempotent(async function tool(k: string) {
          runs++;
          return { key: k, by: 'the next call' };
        }, {
          store,
          reconcile: async ({ key: k, attempts }) => {
            asked.push(attempts);
            return charges(log, k).length > 0 ? { happened: true, result: { key: k, found: 'at the provider' } } : { happened: false };
          },
        });
        // Stuck: the dead owner's lease has minutes to run.
        await expect(tool.withKey(key)(key)).rejects.toBeInstanceOf(lib.DuplicateInFlightError);

        const released = await runNode([CLI, ...storeFlags(where), 'release', '--key', key]);
        expect(released.code, released.stderr).toBe(0);
        expect(released.stdout).toContain(`Released ${key}`);
        expect(released.stdout).toContain('takes it over (attempt 2)');
        expect(released.stdout).toContain('reconcile');

        expect(await tool.withKey(key)(key)).toEqual({ key, found: 'at the provider' });
        expect(asked).toEqual([2]);
        expect(runs).toBe(0);
        expect(charges(log, key)).toHaveLength(1);
        const record = await store.get(key);
        expect([record?.status, record?.attempts]).toEqual(['completed', 2]);
      } finally {
        await store.close();
      }
    }, 60_000);

    it('release --no-reconcile: the record is failed, and the next call runs fn without asking', async () => {
      const where = place();
      const log = join(tempDir(), 'charges.log');
      const key = 'order-43';
      await stuckAfterCharge(where, log, key);

      const released = await runNode([CLI, ...storeFlags(where), '--json', 'release', '--key', key, '--no-reconcile']);
      expect(released.code, released.stderr).toBe(0);
      expect(JSON.parse(released.stdout)).toEqual({ released: key, reconcile: false });
      const text = await runNode([CLI, ...storeFlags(where), 'inspect', '--key', key]);
      expect(text.stdout).toMatch(/status\s+failed/);
      expect(text.stdout).toContain('Released: released by an operator');

      const store = openWhere(where);
      try {
        let asked = 0;
        const tool = lib.idempotent(async function tool(k: string) {
          return { key: k, by: 'the next call' };
        }, { store, reconcile: async () => (asked++, { happened: false }) });
        expect(await tool.withKey(key)(key)).toEqual({ key, by: 'the next call' });
        expect(asked).toBe(0);
        expect((await store.get(key))?.attempts).toBe(2);
      } finally {
        await store.close();
      }
    }, 60_000);
  });
}
