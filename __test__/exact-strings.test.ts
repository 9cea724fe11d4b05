// Every string the TypeScript layer hands to the native addon arrives exactly or is
// refused: napi would turn each lone UTF-16 surrogate into U+FFFD, so two different keys
// or names would share one record and one call would silently replay the other's result.

import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';
import { PG_URL, uniqueTable } from './postgres-server';
import { Pool } from 'pg';

const { idempotent, SqliteStore, RedisStore, PostgresStore } = lib;
const { idempotentTx } = require(`${ROOT}/dist/pg.js`) as typeof import('../dist/pg.js');
const redis = await sharedRedis();
afterAll(() => redis.stop());

const stores: Array<[string, () => InstanceType<typeof SqliteStore> | InstanceType<typeof RedisStore>]> = [
  ['SqliteStore', () => new SqliteStore({ path: tempDb() })],
  ['RedisStore', () => new RedisStore({ url: redis.url, prefix: uniquePrefix() })],
  ['PostgresStore', () => new PostgresStore({ url: PG_URL, table: uniqueTable() }) as never],
];

const lone = (err: unknown, what: RegExp) =>
  err instanceof TypeError && /lone UTF-16 surrogate/.test(err.message) && what.test(err.message);

for (const [storeName, open] of stores) {
  describe(`strings cross into ${storeName} exactly`, () => {
    it('withKey: two keys differing in a lone surrogate are refused, and fn does not run', async () => {
      const store = open();
      let runs = 0;
      const charge = idempotent(async function charge(order: string) {
        return `${order}#${++runs}`;
      }, { store });
      await expect(charge.withKey('order-\uD800')('a')).rejects.toSatisfy((e) => lone(e, /the key/));
      await expect(charge.withKey('order-\uDBFF')('a')).rejects.toSatisfy((e) => lone(e, /the key/));
      expect(runs).toBe(0);
      expect(await store.listRecords()).toEqual([]);
      // A surrogate pair is well-formed text: kept exactly, one record per key.
      expect(await charge.withKey('order-\uD83D\uDE00')('a')).toBe('a#1');
      expect(await charge.withKey('order-\uD83D\uDE01')('a')).toBe('a#2');
      expect((await store.get('order-\uD83D\uDE00'))?.result).toBe('a#1');
      await store.close();
    });

    it('the "key" option\'s return value is checked the same way', async () => {
      const store = open();
      let runs = 0;
      const send = idempotent(async function send(id: string) {
        runs++;
        return id;
      }, { store, key: (id) => `email-${id}` });
      await expect(send('\uDC00')).rejects.toSatisfy((e) => lone(e, /the key/));
      expect(runs).toBe(0);
      await store.close();
    });

    it('names differing in a lone surrogate do not share keys: refused at the call', async () => {
      const store = open();
      let runs = 0;
      const a = idempotent(async () => ++runs, { store, name: 'tool\uD800' });
      const b = idempotent(async () => ++runs, { store, name: 'tool\uDC00' });
      await expect(a()).rejects.toSatisfy((e) => lone(e, /the name/));
      await expect(b()).rejects.toSatisfy((e) => lone(e, /the name/));
      expect(() => a.keyFor()).toThrow(/lone UTF-16 surrogate/);
      // Under an explicit key, the name still reaches the store.
      await expect(a.withKey('k')()).rejects.toSatisfy((e) => lone(e, /the name/));
      expect(runs).toBe(0);
      await store.close();
    });

    it('get, clear, renew and release with such a key are refused, not sent', async () => {
      const store = open();
      await expect(store.get('k\uD800')).rejects.toSatisfy((e) => lone(e, /the key/));
      await expect(store.clear('k\uD800')).rejects.toSatisfy((e) => lone(e, /the key/));
      await expect(store.renew!('k\uD800', 't', 1000)).rejects.toSatisfy((e) => lone(e, /the key/));
      await expect(store.release!('k\uD800')).rejects.toSatisfy((e) => lone(e, /the key/));
      await store.close();
    });
  });
}

// idempotentTx writes through the user's node-postgres client, not the native addon:
// node-postgres encodes a lone surrogate as U+FFFD just as napi does, so the same rule
// must hold on that path (before this check, '\uD800x', '\uD801x' and '\uFFFDx' shared one
// record, and the second and third calls replayed the first's result).
describe('strings cross into idempotentTx (node-postgres) exactly', () => {
  it('keys and names differing in a lone surrogate are refused, and fn does not run', async () => {
    const pool = new Pool({ connectionString: PG_URL });
    try {
      let runs = 0;
      const charge = idempotentTx(async function charge(_client: unknown, order: string) {
        return `${order}#${++runs}`;
      }, { pool, table: uniqueTable() });
      await expect(charge.withKey('order-\uD800')('a')).rejects.toSatisfy((e) => lone(e, /the key/));
      await expect(charge.withKey('order-\uD801')('a')).rejects.toSatisfy((e) => lone(e, /the key/));
      expect(await charge.withKey('order-\uFFFD')('a')).toBe('a#1');
      expect(await charge.withKey('order-\uD83D\uDE00')('a')).toBe('a#2');
      const keyed = idempotentTx(async function keyed(_client: unknown, id: string) {
        return `${id}#${++runs}`;
      }, { pool, table: uniqueTable(), key: (id) => `email-${id}` });
      await expect(keyed('\uDC00')).rejects.toSatisfy((e) => lone(e, /the key/));
      const named = idempotentTx(async (_client: unknown) => ++runs, { pool, table: uniqueTable(), name: 'tool\uD800' });
      await expect(named.withKey('k')()).rejects.toSatisfy((e) => lone(e, /the name/));
      expect(runs).toBe(2);
    } finally {
      await pool.end();
    }
  });
});

describe('store options cross exactly', () => {
  it('SqliteStore path', () => {
    expect(() => new SqliteStore({ path: `${tempDb()}\uDC00` })).toThrow(/path (contains a lone|must not contain lone) UTF-16 surrogate/);
  });

  it('RedisStore url and prefix', () => {
    expect(() => new RedisStore({ url: redis.url, prefix: 'p\uD800:' })).toThrow(/the store's "prefix" contains a lone UTF-16 surrogate/);
    expect(() => new RedisStore({ url: `${redis.url}/0?x=\uD800` })).toThrow(/the store's "url" contains a lone UTF-16 surrogate/);
  });

  it('the CLI --key: a clear message, not a lookup of another key', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path });
    const op = idempotent(async function op() {
      return 1;
    }, { store });
    await op.withKey('k\uFFFD')();
    await store.close();
    const { main } = require(`${ROOT}/dist/cli.js`) as typeof import('../dist/cli.js');
    const stderr: string[] = [];
    const write = process.stderr.write;
    process.stderr.write = ((text: string) => stderr.push(text)) as typeof write;
    try {
      expect(await main(['--db', path, 'inspect', '--key', 'k\uD800'])).not.toBe(0);
    } finally {
      process.stderr.write = write;
    }
    expect(stderr.join('')).toMatch(/the key .* lone UTF-16 surrogate/);
  });
});
