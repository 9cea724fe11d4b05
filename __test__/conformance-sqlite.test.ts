import { describe, it } from 'vitest';

import { lib, tempDb, testing } from './helpers';

testing.storeConformance({ describe, it }, {
  name: 'SqliteStore',
  makeStore: () => new lib.SqliteStore({ path: tempDb() }),
});

testing.storeConformance({ describe, it }, {
  name: "SqliteStore (durability: 'normal')",
  makeStore: () => new lib.SqliteStore({ path: tempDb(), durability: 'normal' }),
});
