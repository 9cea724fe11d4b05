// MemoryStore (idempotent-tools/testing), the store for unit tests of code that uses the
// package, holds the same protocol as the built-in stores: the whole conformance suite.

import { describe, it } from 'vitest';

import { testing } from './helpers';

const { MemoryStore } = testing;

testing.storeConformance({ describe, it }, {
  name: 'MemoryStore',
  makeStore: () => new MemoryStore(),
  openSecondHandle: (store) => new MemoryStore({ sharedWith: store as InstanceType<typeof MemoryStore> }),
});
