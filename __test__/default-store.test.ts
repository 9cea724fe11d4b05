// Choosing the store in one place (issue 22, items 4 and 5): setDefaultStore in code, or
// the environment (a Redis URL, a Postgres URL, a SQLite path), for the library and the
// CLI alike; MemoryStore for tests; ':memory:' refused with a way out.

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, tempDb, tempDir, testing } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';

const { idempotent, defaultStore, setDefaultStore, SqliteStore, RedisStore, PostgresStore } = lib;
const { MemoryStore } = testing;
const CLI = join(ROOT, 'dist', 'cli.js');
const redis = await sharedRedis();
afterAll(async () => {
  await redis.stop();
  await dropTables();
});
afterEach(() => setDefaultStore(null));

/** Runs a script in a child with these variables (and none of the store variables of this process). */
function child(script: string, env: Record<string, string>) {
  return node(['-e', script, ROOT], env);
}

function cli(args: string[], env: Record<string, string>) {
  return node([CLI, ...args], env);
}

function node(args: string[], env: Record<string, string>) {
  const base: Record<string, string | undefined> = { ...process.env };
  for (const v of ['IDEMPOTENT_TOOLS_DB', 'IDEMPOTENT_TOOLS_REDIS_URL', 'IDEMPOTENT_TOOLS_POSTGRES_URL', 'IDEMPOTENT_TOOLS_REDIS_PREFIX', 'IDEMPOTENT_TOOLS_POSTGRES_TABLE']) delete base[v];
  return collect(spawn(process.execPath, args, { cwd: tempDir(), env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
}

/** One call through the default store, and the CLI's view of that store: what each says. */
const CALL = `
const { idempotent, defaultStore } = require(process.argv[1]);
const send = idempotent(async function sendWelcome(to) { return { to, sent: true }; });
send('ada@example.com').then(async (r) => {
  const s = defaultStore();
  console.log(JSON.stringify({ result: r, store: s.constructor.name, path: s.path }));
  await s.close();
});`;

describe('setDefaultStore', () => {
  it('sets the store of every wrapper made without store, including wrappers made before it', async () => {
    const a = new MemoryStore();
    const b = new MemoryStore();
    const send = idempotent(async function sendWelcome(to: string) {
      return { to };
    });
    setDefaultStore(a);
    expect(defaultStore()).toBe(a);
    await send('ada');
    expect((await a.listRecords()).map((r) => r.name)).toEqual(['sendWelcome']);
    setDefaultStore(b);
    await send('ada');
    expect((await b.listRecords()).length).toBe(1);
    setDefaultStore(null);
    expect(defaultStore()).toBeInstanceOf(SqliteStore);
  });

  it('refuses what is not a store, saying what to pass', () => {
    expect(() => setDefaultStore({} as never)).toThrow(/must implement the store interface \(missing: get, acquire, complete, fail\)/);
    expect(() => setDefaultStore(undefined as never)).toThrow(/must implement the store interface/);
  });
});

describe('the environment chooses the default store, for the library and the CLI alike', () => {
  it('IDEMPOTENT_TOOLS_REDIS_URL: the library writes to Redis, and inspect reads the same records', async () => {
    const prefix = uniquePrefix();
    const env = { IDEMPOTENT_TOOLS_REDIS_URL: redis.url, IDEMPOTENT_TOOLS_REDIS_PREFIX: prefix };
    const ran = await child(CALL, env);
    expect(ran.stderr, ran.stderr).toBe('');
    expect(JSON.parse(ran.stdout)).toMatchObject({ result: { to: 'ada@example.com', sent: true }, store: 'RedisStore' });
    const store = new RedisStore({ url: redis.url, prefix });
    expect((await store.listRecords()).map((r) => r.name)).toEqual(['sendWelcome']);
    await store.close();
    const inspected = await cli(['inspect', '--json'], env);
    expect(JSON.parse(inspected.stdout).map((r: { name: string }) => r.name)).toEqual(['sendWelcome']);
  });

  it('IDEMPOTENT_TOOLS_POSTGRES_URL: the library writes to Postgres, and inspect reads the same records', async () => {
    const table = uniqueTable();
    const env = { IDEMPOTENT_TOOLS_POSTGRES_URL: PG_URL, IDEMPOTENT_TOOLS_POSTGRES_TABLE: table };
    const ran = await child(CALL, env);
    expect(ran.stderr, ran.stderr).toBe('');
    expect(JSON.parse(ran.stdout)).toMatchObject({ store: 'PostgresStore' });
    const store = new PostgresStore({ url: PG_URL, table });
    expect((await store.listRecords()).map((r) => r.name)).toEqual(['sendWelcome']);
    await store.close();
    const inspected = await cli(['inspect', '--json'], env);
    expect(JSON.parse(inspected.stdout).map((r: { name: string }) => r.name)).toEqual(['sendWelcome']);
  });

  it('IDEMPOTENT_TOOLS_DB: a SQLite file; both URLs at once: a TypeError that says to set one', async () => {
    const db = tempDb();
    const ran = await child(CALL, { IDEMPOTENT_TOOLS_DB: db });
    expect(JSON.parse(ran.stdout)).toMatchObject({ store: 'SqliteStore', path: db });
    const both = await child(CALL, { IDEMPOTENT_TOOLS_REDIS_URL: redis.url, IDEMPOTENT_TOOLS_POSTGRES_URL: PG_URL });
    expect(both.stderr).toMatch(/both IDEMPOTENT_TOOLS_REDIS_URL and IDEMPOTENT_TOOLS_POSTGRES_URL are set; set one/);
    const refused = await cli(['inspect'], { IDEMPOTENT_TOOLS_REDIS_URL: redis.url, IDEMPOTENT_TOOLS_POSTGRES_URL: PG_URL });
    expect(refused.stderr).toMatch(/set one/);
    expect(refused.code).toBe(2);
  });
});

describe('tests and dev loops', () => {
  it("new SqliteStore({ path: ':memory:' }) is refused, pointing at MemoryStore", () => {
    expect(() => new SqliteStore({ path: ':memory:' })).toThrow(/not a file path.*MemoryStore/s);
    expect(() => new SqliteStore({ path: 'file::memory:?cache=shared' })).toThrow(/not a file path/);
  });

  it('MemoryStore runs a wrapped call once and replays it, and closes for good', async () => {
    const store = new MemoryStore();
    let runs = 0;
    const charge = idempotent(async function charge(order: string) {
      runs++;
      return { order };
    }, { store });
    expect(await charge('o-1')).toEqual({ order: 'o-1' });
    expect(await charge('o-1')).toEqual({ order: 'o-1' });
    expect(runs).toBe(1);
    await store.close();
    await expect(charge('o-2')).rejects.toBeInstanceOf(lib.StoreError);
  });
});
