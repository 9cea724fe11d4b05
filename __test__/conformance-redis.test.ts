import { afterAll, describe, it } from 'vitest';

import { lib, testing } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const redis = await sharedRedis();
afterAll(() => redis.stop());

const prefixes = new WeakMap<object, string>();

testing.storeConformance({ describe, it }, {
  name: 'RedisStore',
  makeStore: () => {
    const prefix = uniquePrefix();
    const store = new lib.RedisStore({ url: redis.url, prefix });
    prefixes.set(store, prefix);
    return store;
  },
  openSecondHandle: (store) => new lib.RedisStore({ url: redis.url, prefix: prefixes.get(store)! }),
});
