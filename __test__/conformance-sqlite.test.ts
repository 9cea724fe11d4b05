import { describe, it } from 'vitest';

import { lib, tempDb, testing } from './helpers';

type Sqlite = InstanceType<typeof lib.SqliteStore>;

testing.storeConformance({ describe, it }, {
  name: 'SqliteStore',
  makeStore: () => new lib.SqliteStore({ path: tempDb() }),
  openSecondHandle: (store) => new lib.SqliteStore({ path: (store as Sqlite).path }),
});

testing.storeConformance({ describe, it }, {
  name: "SqliteStore (durability: 'normal')",
  makeStore: () => new lib.SqliteStore({ path: tempDb(), durability: 'normal' }),
  openSecondHandle: (store) => new lib.SqliteStore({ path: (store as Sqlite).path, durability: 'normal' }),
});
