// The CLI on a PostgreSQL store, run as a child process like a user runs it.

import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, runNode } from './helpers';
import { PG_URL, dropTables, sql, uniqueTable } from './postgres-server';

const CLI = join(ROOT, 'dist', 'cli.js');
const cli = (args: string[], env: Record<string, string> = {}) => runNode([CLI, ...args], { env });

afterAll(() => dropTables());

describe('idempotent-tools CLI with --postgres', () => {
  it('migrate creates the table; inspect, stats, release, prune and clear work on it', async () => {
    const table = uniqueTable();
    // Nothing recorded there yet: inspect says so and creates nothing.
    const none = await cli(['--postgres', PG_URL, '--table', table, 'inspect']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/does not exist.*migrate/);
    // migrate: the URL from DATABASE_URL.
    const made = await cli(['--table', table, 'migrate', '--json'], { DATABASE_URL: PG_URL });
    expect(made.stderr).toBe('');
    expect(JSON.parse(made.stdout)).toEqual({ created: true });
    expect(JSON.parse((await cli(['--postgres', PG_URL, '--table', table, 'migrate', '--json'])).stdout)).toEqual({ created: false });

    // A role that may not create tables uses what migrate made.
    const store = new lib.PostgresStore({ url: PG_URL, table, createTable: false, pruneIntervalMs: 0 }); // prune is the CLI's below
    const charge = lib.idempotent(async function charge(order: string) {
      return { charged: order };
    }, { store, ttlMs: 60_000 });
    await charge.withKey('charge-order-42')('o-42');
    const stuck = await store.acquire({ key: 'stuck', name: 'charge', fingerprint: 'fp', leaseMs: 60_000, force: false });
    expect(stuck.acquired).toBe(true);

    const listed = await cli(['--postgres', PG_URL, '--table', table, 'inspect', '--json']);
    expect(JSON.parse(listed.stdout).map((r: { key: string }) => r.key).sort()).toEqual(['charge-order-42', 'stuck']);
    const one = await cli(['--postgres', PG_URL, '--table', table, 'inspect', '--key', 'charge-order-42']);
    expect(one.stdout).toMatch(/status\s+completed/);
    const stats = JSON.parse((await cli(['--postgres', PG_URL, '--table', table, 'stats', '--json'])).stdout);
    expect([stats.completed, stats.pending]).toEqual([1, 1]);
    expect((await cli(['--postgres', PG_URL, '--table', table, 'release', '--key', 'stuck'])).code).toBe(0);
    const released = await store.get('stuck');
    expect(released?.status).toBe('pending'); // a claim nobody holds: the next call takes it over
    expect(released!.leaseExpiresAt!).toBeLessThanOrEqual(Date.now() + 1000);

    await sql(`UPDATE "${table}" SET expires_at = 1 WHERE key = 'charge-order-42'`);
    expect(JSON.parse((await cli(['--postgres', PG_URL, '--table', table, 'prune', '--json'])).stdout)).toEqual({ deleted: 1 });
    expect(JSON.parse((await cli(['--postgres', PG_URL, '--table', table, 'clear', '--yes', '--json'])).stdout)).toEqual({ deleted: 1 });
    await store.close();
  });

  it('the password never shows, and a bad table name is a clear error', async () => {
    const url = PG_URL.replace('postgres@', 'postgres:s3cret-pw@');
    const r = await cli(['--postgres', url, '--table', 'no such;table', 'inspect']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/invalid table name/);
    expect(r.stderr + r.stdout).not.toContain('s3cret-pw');
    const usage = await cli(['--db', 'x.db', '--postgres', PG_URL, 'inspect']);
    expect(usage.code).toBe(2);
  });
});
