// A short torture run on each store (the full one: node stress/torture.js --seconds 600).

import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, runNode } from './helpers';
import { sharedRedis } from './redis-server';

const redis = await sharedRedis();
afterAll(() => redis.stop());

describe.concurrent('torture (short)', () => {
  for (const store of ['sqlite', 'redis']) {
    it(`${store}: 8 processes, random kills, mixed raise/block/retry: clean verdict`, async () => {
      const r = await runNode([join(ROOT, 'stress', 'torture.js'), '--store', store, '--seconds', '6', '--redis', redis.url]);
      expect(r.stdout, r.stderr).toMatch(/: CLEAN: /);
      expect(r.code).toBe(0);
    });
  }
});
