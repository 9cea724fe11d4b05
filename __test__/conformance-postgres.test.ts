import { afterAll, describe, it } from 'vitest';

import { lib, testing } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';

afterAll(() => dropTables());

const tables = new WeakMap<object, string>();

testing.storeConformance({ describe, it }, {
  name: 'PostgresStore',
  makeStore: () => {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table });
    tables.set(store, table);
    return store;
  },
  openSecondHandle: (store) => new lib.PostgresStore({ url: PG_URL, table: tables.get(store)! }),
  // A statement is a round trip to a server process (a new table's first ones plan and
  // create it): leases of 30 ms are too short to hold on a loaded 2-core machine.
  timeScale: 5,
});
