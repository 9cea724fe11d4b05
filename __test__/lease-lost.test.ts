// An owner paused past its lease (a stopped process, a laptop lid, a long GC) comes back
// after another call took its record over: its result is not recorded, and its caller is
// told so (LeaseLostError, with what its run returned), never given an unrecorded result.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, lineFrom, tempDb, tempDir } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const { idempotent, SqliteStore, RedisStore, DuplicateInFlightError } = lib;
const OWNER = join(ROOT, '__test__', 'fixtures', 'paused-owner.js');
const LEASE_MS = 1000;
const redis = await sharedRedis();
afterAll(() => redis.stop());

type Where = { db: string } | { redis: string; prefix: string };
const places: Array<[string, () => Where]> = [
  ['SqliteStore', () => ({ db: tempDb() })],
  ['RedisStore', () => ({ redis: redis.url, prefix: uniquePrefix() })],
];

for (const [storeName, place] of places) {
  describe(`an owner paused past its lease: ${storeName}`, () => {
    it('the taker-over records its result; the paused owner\'s caller gets LeaseLostError with its own run\'s result', async () => {
      const where = place();
      const log = join(tempDir(), 'effects.log');
      const key = 'paused-1';
      const owner = spawn(process.execPath, [OWNER, JSON.stringify({ ...where, log, key, leaseMs: LEASE_MS })], {
        cwd: ROOT,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      const done = collect(owner);
      await lineFrom(owner, /RUNNING/);
      owner.kill('SIGSTOP');

      const store = 'db' in where ? new SqliteStore({ path: where.db }) : new RedisStore({ url: where.redis, prefix: where.prefix });
      const tool = idempotent(async function tool(k: string) {
        require('node:fs').appendFileSync(log, `${k} parent\n`);
        return { key: k, by: 'taker' };
      }, { store, leaseMs: LEASE_MS });
      let taken: unknown;
      for (;;) {
        try {
          taken = await tool.withKey(key)(key);
          break;
        } catch (err) {
          if (!(err instanceof DuplicateInFlightError)) throw err;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      expect(taken).toEqual({ key, by: 'taker' });

      owner.kill('SIGCONT');
      owner.stdin!.end('go\n');
      const out = await done;
      expect(out.stdout, out.stderr).toMatch(/ERROR LEASE_LOST \{"key":"paused-1","by":"paused"\}/);
      expect(out.stdout).not.toMatch(/RESULT/);

      const record = await store.get(key);
      expect(record?.status).toBe('completed');
      expect(record?.result).toEqual({ key, by: 'taker' });
      expect(await tool.withKey(key)(key)).toEqual({ key, by: 'taker' });
      expect(readFileSync(log, 'utf8').trim().split('\n')).toHaveLength(2);
      await store.close();
    });
  });
}
