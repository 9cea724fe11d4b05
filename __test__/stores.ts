/**
 * The three built-in stores for tests that run a case on each, and what a child process
 * needs to open the same one (`fixtures/worker.js` and `fixtures/steps-worker.js` take
 * these options): a SQLite file, a Redis prefix on the test's server, a Postgres table.
 */

import { lib, tempDb, testing } from './helpers';
import { PG_URL, uniqueTable } from './postgres-server';

export type Where = { db: string } | { redis: string; prefix: string } | { postgres: string; table: string };

/** [store name, a new place of records] for each store; Redis on the server at `redisUrl`. */
export function threeStores(redisUrl: string, uniquePrefix: () => string): Array<[string, () => Where]> {
  return [
    ['SqliteStore', () => ({ db: tempDb() })],
    ['RedisStore', () => ({ redis: redisUrl, prefix: uniquePrefix() })],
    ['PostgresStore', () => ({ postgres: PG_URL, table: uniqueTable() })],
  ];
}

/** A store on that place, in this process. */
export function openWhere(where: Where) {
  if ('db' in where) return new lib.SqliteStore({ path: where.db });
  if ('redis' in where) return new lib.RedisStore({ url: where.redis, prefix: where.prefix });
  return new lib.PostgresStore({ url: where.postgres, table: where.table });
}

/** Calls until a dead owner's claim can be taken over (DuplicateInFlightError until its lease runs out). */
export async function afterTheOwner<T>(call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof lib.DuplicateInFlightError)) throw err;
      await new Promise((r) => setTimeout(r, 50)); // polling the store: the lease runs out on its own clock
    }
  }
}

type AnyStore = import('../dist/core/store.js').Store & { close(): Promise<void> };

/** Opens a store on the given transport: `IDEMPOTENT_TOOLS_REDIS_TRANSPORT` is read when a RedisStore is made. */
function redisOn(transport: 'loop' | 'tokio', url: string, prefix: string): AnyStore {
  const before = process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT;
  if (transport === 'tokio') process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT = 'tokio';
  else delete process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT;
  try {
    return new lib.RedisStore({ url, prefix });
  } finally {
    if (before === undefined) delete process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT;
    else process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT = before;
  }
}

/**
 * Every store a case must hold on, with `open(n)`: n handles (separate store objects, as
 * separate processes would have) on one new place of records. Redis on both transports
 * (the JavaScript thread's event loop, and Tokio's), and MemoryStore.
 */
export function eachStore(redisUrl: string, uniquePrefix: () => string): Array<[string, (n: number) => AnyStore[]]> {
  const times = <T>(n: number, make: () => T) => Array.from({ length: n }, make);
  return [
    ['SqliteStore', (n) => {
      const db = tempDb();
      return times(n, () => new lib.SqliteStore({ path: db }));
    }],
    ['RedisStore (loop transport)', (n) => {
      const prefix = uniquePrefix();
      return times(n, () => redisOn('loop', redisUrl, prefix));
    }],
    ['RedisStore (Tokio transport)', (n) => {
      const prefix = uniquePrefix();
      return times(n, () => redisOn('tokio', redisUrl, prefix));
    }],
    ['PostgresStore', (n) => {
      const table = uniqueTable();
      return times(n, () => new lib.PostgresStore({ url: PG_URL, table }));
    }],
    ['MemoryStore', (n) => {
      const first = new testing.MemoryStore();
      return [first, ...times(n - 1, () => new testing.MemoryStore({ sharedWith: first }))];
    }],
  ];
}
