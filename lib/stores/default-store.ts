/**
 * The environment's choice of store, which the library's default store (core/default-store.ts,
 * unless `setDefaultStore` chose one in code), the CLI and the MCP proxy read the same way:
 *
 * - `IDEMPOTENT_TOOLS_REDIS_URL` (with `IDEMPOTENT_TOOLS_REDIS_PREFIX`): a RedisStore;
 * - `IDEMPOTENT_TOOLS_POSTGRES_URL` (with `IDEMPOTENT_TOOLS_POSTGRES_TABLE`): a PostgresStore;
 * - else the SQLite file `IDEMPOTENT_TOOLS_DB` (default `~/.idempotent_tools/store.db`), in
 *   the current project's namespace.
 *
 * Projects: the SQLite default file is shared by every project on the machine, so it
 * keeps each project's records apart (`projectNamespace()`). A Redis or Postgres server is
 * shared on purpose by the processes of one application, on many hosts and in folders
 * whose package names differ (a web server, a worker, a cron job): they must see one
 * another's records, so no project is mixed in; keep applications apart with a prefix or
 * a table of their own.
 */

import { resolve } from 'node:path';

import { registerDefaultStoreSource } from '../core/default-store.js';
import type { Store } from '../core/store.js';
import { PostgresStore, postgresPlace } from './postgres-store.js';
import { projectNamespace } from './project.js';
import { RedisStore, redisPlace } from './redis-store.js';
import { SqliteStore, defaultStorePath, sqlitePlace } from './sqlite-store.js';

// Where they were before core/ owned them: modules that import them from here keep working.
export { defaultStore, setDefaultStore } from '../core/default-store.js';

/** Which store the environment names, before it is opened. */
export type StoreChoice =
  | { kind: 'redis'; url: string; prefix?: string }
  | { kind: 'postgres'; url: string; table?: string }
  | { kind: 'sqlite'; path: string };

const given = (name: string): string | undefined => {
  const value = process.env[name];
  return value === undefined || value === '' ? undefined : value;
};

/**
 * The store the environment names. Both a Redis and a Postgres URL is a TypeError: which
 * one the records go to must never depend on an order of precedence nobody remembers.
 */
export function storeFromEnvironment(): StoreChoice {
  const redis = given('IDEMPOTENT_TOOLS_REDIS_URL');
  const postgres = given('IDEMPOTENT_TOOLS_POSTGRES_URL');
  if (redis !== undefined && postgres !== undefined) {
    throw new TypeError(
      'idempotent-tools: both IDEMPOTENT_TOOLS_REDIS_URL and IDEMPOTENT_TOOLS_POSTGRES_URL are set; set one, so that every ' +
        'process (the library, the CLI, the MCP proxy) writes to the same store',
    );
  }
  if (redis !== undefined) return { kind: 'redis', url: redis, prefix: given('IDEMPOTENT_TOOLS_REDIS_PREFIX') };
  if (postgres !== undefined) return { kind: 'postgres', url: postgres, table: given('IDEMPOTENT_TOOLS_POSTGRES_TABLE') };
  return { kind: 'sqlite', path: defaultStorePath() };
}

/**
 * A store made from an environment variable's value: an error about the value names the
 * variable it came from (not `RedisStore` or `--redis`, which the user never wrote).
 */
function fromVariable(variable: string, open: () => Store): Store {
  try {
    return open();
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    const message = err.message.replace(/^(RedisStore|PostgresStore): /, '');
    throw new TypeError(`idempotent-tools: ${variable} (in the environment): ${message}; fix or unset the variable`, { cause: err });
  }
}

/** The stores the environment named so far, one per choice (and project, for SQLite). */
const opened = new Map<string, Store & { closed?: boolean }>();

function opening(choice: StoreChoice): { id: string; place: () => string; open: () => Store } {
  switch (choice.kind) {
    case 'redis':
      return {
        id: JSON.stringify(['redis', choice.url, choice.prefix ?? null]),
        place: () => redisPlace(choice.url, choice.prefix),
        open: () => fromVariable('IDEMPOTENT_TOOLS_REDIS_URL', () => new RedisStore({ url: choice.url, prefix: choice.prefix })),
      };
    case 'postgres':
      return {
        id: JSON.stringify(['postgres', choice.url, choice.table ?? null]),
        place: () => postgresPlace({ connectionString: choice.url }, choice.table),
        open: () => fromVariable('IDEMPOTENT_TOOLS_POSTGRES_URL', () => new PostgresStore({ url: choice.url, table: choice.table })),
      };
    case 'sqlite': {
      const path = resolve(choice.path);
      const namespace = projectNamespace();
      return { id: JSON.stringify(['sqlite', path, namespace]), place: () => sqlitePlace(path, namespace), open: () => new SqliteStore({ path, namespace }) };
    }
  }
}

/** The store the environment names now (the same object for the same choice and project, while open). */
export function environmentStore(): Store {
  const { id, open } = opening(storeFromEnvironment());
  let store = opened.get(id);
  if (store === undefined || store.closed === true) {
    store = open();
    opened.set(id, store);
  }
  return store;
}

// The default store of core/ (core/default-store.ts) is the environment's choice unless
// setDefaultStore says otherwise: registered as this module loads, which every entry point
// that can make a wrapper without `store` makes happen (index.ts, integrations/shared.ts).
registerDefaultStoreSource({
  open: environmentStore,
  place: () => {
    let choice: StoreChoice;
    try {
      choice = storeFromEnvironment();
    } catch {
      return 'environment:unresolved'; // a misconfigured environment: the first call says what is wrong
    }
    return opening(choice).place();
  },
});
