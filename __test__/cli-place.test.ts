// The CLI names the place it reads (issue 31 item 6): with Redis the server, database and
// prefix (and that a Redis store keeps no projects apart), with a hint at --prefix when
// nothing is there; `inspect --key` says the project once; `stats` counts calls' records,
// not the store's key-id secret; counts are singular or plural as they should be.

import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, runNode, tempDb } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';

const CLI = join(ROOT, 'dist', 'cli.js');
const cli = (...args: string[]) => runNode([CLI, ...args]);
const redis = await sharedRedis();
afterAll(async () => {
  await redis.stop();
  await dropTables();
});

describe('the CLI names the place it reads', () => {
  it('Redis: the server, database and prefix, and a hint at --prefix when nothing is found', async () => {
    const prefix = uniquePrefix();
    const url = `${redis.url}/12`;
    const empty = await cli('--redis', url, '--prefix', prefix, 'inspect');
    expect(empty.code).toBe(0);
    expect(empty.stdout.trim()).toBe(`No records in ${url} under prefix "${prefix}".`);
    expect(empty.stderr).toContain('a RedisStore keeps no projects apart');
    expect(empty.stderr).toContain('give --prefix P');
    const missing = await cli('--redis', url, '--prefix', prefix, 'inspect', '--key', 'order-42');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`no record with key order-42 in ${url} under prefix "${prefix}"`);
    expect(missing.stderr).toContain('give --prefix P');
    // The default prefix is named too.
    const byDefault = await cli('--redis', url, 'stats');
    expect(byDefault.stdout).toMatch(new RegExp(`^store +${url.replace(/[/.]/g, '\\$&')} under prefix "idempotent-tools:"$`, 'm'));

    const store = new lib.RedisStore({ url, prefix });
    await lib.idempotent(async function op() {
      return 1;
    }, { store }).withKey('order-42')();
    await store.close();
    const found = await cli('--redis', url, '--prefix', prefix, 'inspect');
    expect(found.stdout).toContain('order-42');
    expect(found.stderr).toBe(''); // something is there: no hint
  });

  it('Postgres: the table, and a hint at --table when nothing is found', async () => {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table });
    await store.listRecords(); // creates the table
    await store.close();
    const empty = await cli('--postgres', PG_URL, '--table', table, 'inspect');
    expect(empty.stdout).toMatch(new RegExp(`No records in .* table ${table}\\.`));
    expect(empty.stderr).toContain('give --table T');
  });

  it('inspect --key says the project once; stats and inspect count calls, not the key-id secret; plurals', async () => {
    const db = tempDb();
    const store = new lib.SqliteStore({ path: db, namespace: 'shop' });
    const events: string[] = [];
    // Listened to (an onEvent): the store writes its key-id secret, a record of its own.
    const ship = lib.idempotent(async function ship(order: string) {
      return order;
    }, { store, meta: () => ({ scope: 'thread-1' }), onEvent: (e) => events.push(e.type) });
    await ship('o-1');
    await ship('o-2');
    await ship('o-3');
    await store.close();
    expect(events).toContain('executed');

    const one = await cli('--db', db, 'inspect', '--key', ship.keyFor('o-1'));
    expect(one.code).toBe(0);
    expect(one.stdout.match(/^project\s/gm)).toEqual(['project ']); // the record's project and its call's: one line

    const stats = JSON.parse((await cli('--db', db, '--project', 'shop', 'stats', '--json')).stdout);
    expect([stats.completed, stats.pending, stats.failed]).toEqual([3, 0, 0]);
    const text = await cli('--db', db, '--project', 'shop', 'stats');
    expect(text.stdout).toMatch(/^kept +3 records \(3 completed/m);

    // Two hidden by a filter: "2 more records ... do not match ... see them" (one: cli-projects.test.ts).
    const filtered = await cli('--db', db, '--project', 'shop', 'inspect', '--key', ship.keyFor('o-1'), '--name', 'ship');
    expect(filtered.code).toBe(0);
    expect(filtered.stderr).toMatch(/\(2 more records in .* for project "shop" do not match --name --key; leave them out to see them\)/);
  });
});
