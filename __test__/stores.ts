/**
 * The three built-in stores for tests that run a case on each, and what a child process
 * needs to open the same one (`fixtures/worker.js` and `fixtures/steps-worker.js` take
 * these options): a SQLite file, a Redis prefix on the test's server, a Postgres table.
 */

import { lib, tempDb } from './helpers';
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
