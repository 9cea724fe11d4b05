/**
 * The store of every wrapper made without `store`, chosen in one place: `setDefaultStore`
 * in code, else the environment, which the CLI and the MCP proxy read the same way:
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

import { RedisStore } from './redis-store.js';
import { PostgresStore } from './postgres-store.js';
import { SqliteStore, defaultStorePath } from './sqlite-store.js';
import { projectNamespace } from './project.js';
import { resolve } from 'node:path';
import type { Store } from '../core/store.js';

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

/** The stores the environment named so far, one per choice (and project, for SQLite). */
const opened = new Map<string, Store & { closed?: boolean }>();
let chosen: Store | undefined;
/** Bumped by every setDefaultStore: wrappers that resolved the default before look again. */
let generation = 0;

/** @internal How many times the default was set (see `idempotent.ts`). */
export function defaultStoreGeneration(): number {
  return generation;
}

function opening(choice: StoreChoice): { id: string; open: () => Store } {
  switch (choice.kind) {
    case 'redis':
      return { id: JSON.stringify(['redis', choice.url, choice.prefix ?? null]), open: () => new RedisStore({ url: choice.url, prefix: choice.prefix }) };
    case 'postgres':
      return { id: JSON.stringify(['postgres', choice.url, choice.table ?? null]), open: () => new PostgresStore({ url: choice.url, table: choice.table }) };
    case 'sqlite': {
      const path = resolve(choice.path);
      const namespace = projectNamespace();
      return { id: JSON.stringify(['sqlite', path, namespace]), open: () => new SqliteStore({ path, namespace }) };
    }
  }
}

/**
 * The store every wrapper made without `store` uses: the one `setDefaultStore` set, else
 * the one the environment names (read when called; every call with the same environment
 * and project returns the same store). Its class and `path` say which it is.
 */
export function defaultStore(): Store {
  if (chosen !== undefined) return chosen;
  const { id, open } = opening(storeFromEnvironment());
  let store = opened.get(id);
  if (store === undefined || store.closed === true) {
    store = open();
    opened.set(id, store);
  }
  return store;
}

/**
 * Sets the store of every wrapper made without `store` (calls already running keep the
 * one they started with); `null` goes back to the environment's choice. The store is
 * the caller's: closing it is too.
 */
export function setDefaultStore(store: Store | null): void {
  if (store !== null) {
    const missing = ['get', 'acquire', 'complete', 'fail'].filter(
      (m) => store === undefined || typeof (store as unknown as Record<string, unknown>)[m] !== 'function',
    );
    if (store === undefined || typeof store !== 'object' || missing.length > 0) {
      throw new TypeError(
        `setDefaultStore(store): store must implement the store interface (missing: ${missing.join(', ') || 'an object'}); ` +
          'pass a SqliteStore, RedisStore, PostgresStore or MemoryStore, or null for the environment\'s choice',
      );
    }
  }
  chosen = store ?? undefined;
  generation++;
}
