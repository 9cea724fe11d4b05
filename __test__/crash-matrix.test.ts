// A process killed (SIGKILL) at every step of the call protocol, on every store. The
// invariant: a recorded completion never runs again; a pending record is taken over only
// after its lease; the only duplicate is a crash between the side effect and its record.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, tempDir, testHooks } from './helpers';
import { dropTables } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';
import { openWhere, threeStores } from './stores';

const WORKER = join(ROOT, '__test__', 'fixtures', 'worker.js');
const LEASE_MS = 3000;
const redis = await sharedRedis();
afterAll(async () => {
  await redis.stop();
  await dropTables();
});

const stores = threeStores(redis.url, uniquePrefix);

// [where it dies, how, effects after the crash, the record it leaves, total effects in the end]
const points: Array<[string, Record<string, unknown>, Record<string, string>, number, string, number]> = [
  ['after acquire, before fn', {}, { IDEMPOTENT_TOOLS_FAULT: 'after-acquire' }, 0, 'pending', 1],
  ['inside fn, before the side effect', { dieInFn: true }, {}, 0, 'pending', 1],
  ['after the side effect, before complete (the one window)', {}, { IDEMPOTENT_TOOLS_FAULT: 'after-fn' }, 1, 'pending', 2],
  ['after complete, before the promise resolves', {}, { IDEMPOTENT_TOOLS_FAULT: 'after-complete' }, 1, 'completed', 1],
];

function effects(log: string): number {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
}

async function clockPast(epochMs: number) {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, epochMs - Date.now() + 1));
}

for (const [storeName, place] of stores) {
  describe.concurrent(`crash at every step: ${storeName}`, () => {
    for (const [point, extra, env, effectsAfterCrash, leftStatus, totalEffects] of points) {
      it(point, async () => {
        const where = place();
        const log = join(tempDir(), 'effects.log');
        const key = 'charge-1';
        const child = spawn(process.execPath, [WORKER, 'once', JSON.stringify({ ...where, log, key, leaseMs: LEASE_MS, ...extra })], {
          cwd: ROOT,
          env: { ...process.env, ...(Object.keys(env).length > 0 ? testHooks(env) : {}) },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        const died = await collect(child);
        expect(died.signal, died.stderr).toBe('SIGKILL');
        expect(died.stdout).not.toMatch(/DONE/);
        expect(effects(log)).toBe(effectsAfterCrash);

        const store = openWhere(where);
        const tool = lib.idempotent(async function tool(k: string) {
          require('node:fs').appendFileSync(log, `${k} parent\n`);
          return { key: k, by: 'parent' };
        }, { store, leaseMs: LEASE_MS });
        const call = () => tool.withKey(key)(key);

        const record = await store.get(key);
        expect(record?.status).toBe(leftStatus);
        if (leftStatus === 'pending') {
          // Not taken over while the dead owner's lease lasts...
          await expect(call()).rejects.toBeInstanceOf(lib.DuplicateInFlightError);
          // ...and taken over, once, after it.
          await clockPast(record!.leaseExpiresAt!);
          expect(await call()).toEqual({ key, by: 'parent' });
          expect((await store.get(key))?.attempts).toBe(2);
        }
        await call(); // a replay from here on
        expect(effects(log)).toBe(totalEffects);
        await store.close();
      });
    }
  });
}
