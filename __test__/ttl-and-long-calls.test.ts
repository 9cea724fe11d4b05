// TTL and a long call together (issue 19, finding 6): `ttlMs` counts from the settle, and a
// pending record never expires, however old. An owner that runs longer than `ttlMs`,
// charges, and dies leaves a claim that the next call must take over (asking `reconcile`),
// never one it may claim as new: that would charge the card twice.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, tempDir } from './helpers';
import { dropTables } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';
import { afterTheOwner, openWhere, threeStores } from './stores';

const { idempotent } = lib;
const WORKER = join(ROOT, '__test__', 'fixtures', 'worker.js');
const redis = await sharedRedis();
afterAll(async () => {
  await redis.stop();
  await dropTables();
});

const places = threeStores(redis.url, uniquePrefix);

function charges(log: string, key: string): number {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter((l) => l.startsWith(`${key} `)).length : 0;
}

/** Resolves once the wall clock has passed `epochMs` (waiting for time itself, not for an event). */
async function clockPast(epochMs: number): Promise<void> {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, Math.max(1, epochMs - Date.now() + 1)));
}

for (const [storeName, place] of places) {
  describe(`a call that outlives its ttlMs, charges and dies: ${storeName}`, () => {
    it('leaves a claim the next call takes over (reconcile is asked), never a record that counts as new', async () => {
      const where = place();
      const log = join(tempDir(), 'charges.log');
      const key = 'order-6';
      const ttlMs = 150;
      const leaseMs = 1200;
      const child = spawn(process.execPath, [WORKER, 'hang', JSON.stringify({ ...where, log, key, leaseMs, ttlMs })], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const startedAt = Date.now();
      await lineFrom(child, /^RUNNING$/); // charged, and still running (renewing its lease)
      await clockPast(startedAt + 3 * ttlMs); // the owner has now run longer than ttlMs
      const died = new Promise((r) => child.once('close', r));
      child.kill('SIGKILL');
      await died;
      expect(charges(log, key)).toBe(1);

      const store = openWhere(where);
      try {
        const asked: number[] = [];
        const tool = idempotent(
          async function tool(k: string) {
            throw new Error(`fn ran again for ${k}: the dead owner's charge was forgotten`);
          },
          {
            store,
            ttlMs,
            leaseMs,
            reconcile: async ({ attempts }) => {
              asked.push(attempts);
              return { happened: true, result: { key, by: 'the provider' } };
            },
          },
        );
        const result = await afterTheOwner(() => tool.withKey(key)(key));
        expect(asked).toEqual([2]);
        expect(result).toEqual({ key, by: 'the provider' });
        expect(charges(log, key)).toBe(1);
      } finally {
        await store.close();
      }
    });

    it('a pending claim carries no expiry: it is still there, pending, long after ttlMs', async () => {
      const store = openWhere(place());
      try {
        const claim = await store.acquire({ key: 'k', name: 'tool', fingerprint: 'fp', leaseMs: 60_000, ttlMs: 20, force: false });
        expect(claim.acquired).toBe(true);
        const pending = await store.get('k');
        expect(pending).toMatchObject({ status: 'pending', expiresAt: null });
        await clockPast(Date.now() + 60);
        expect((await store.get('k'))?.status).toBe('pending');
        expect((await store.listRecords()).map((r) => r.key)).toEqual(['k']);
        // A duplicate is in flight, not a new call.
        const again = await store.acquire({ key: 'k', name: 'tool', fingerprint: 'fp', leaseMs: 60_000, ttlMs: 20, force: false });
        expect(again.acquired).toBe(false);
        if (claim.acquired) {
          // A long ttl, so that the read below comes well before the record expires.
          expect(await store.complete({ key: 'k', token: claim.token, resultJson: '1', ttlMs: 3_600_000 })).toBe(true);
        }
        const done = await store.get('k');
        expect(done!.expiresAt! - done!.updatedAt).toBe(3_600_000); // ttlMs counts from the settle
      } finally {
        await store.close();
      }
    });
  });
}
