import { afterAll, describe, it } from 'vitest';

import { lib, testing } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const redis = await sharedRedis();
afterAll(() => redis.stop());

testing.storeConformance({ describe, it }, {
  name: 'RedisStore',
  makeStore: () => new lib.RedisStore({ url: redis.url, prefix: uniquePrefix() }),
});
