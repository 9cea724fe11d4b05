import { afterAll, describe, it } from 'vitest';

import { lib, testing } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';

afterAll(() => dropTables());

testing.storeConformance({ describe, it }, {
  name: 'PostgresStore',
  makeStore: () => new lib.PostgresStore({ url: PG_URL, table: uniqueTable() }),
});
