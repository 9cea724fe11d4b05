// Issue 21 item 7: expired records are deleted, not only hidden. SQLite prunes when a
// store opens and periodically while it is open; a pending record is never deleted (it is
// taken over). `stats` says how much is kept, `inspect` how many expired records remain.
//
// "Expired" without waiting: a child process whose wall clock (as the store sees it) is a
// day ahead (IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS) sees records with a one-minute
// ttl as expired, while this process still sees them.

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, runNode, tempDb, testHooks } from './helpers';
import { PG_URL, dropTables, sql, uniqueTable } from './postgres-server';

const { idempotent, SqliteStore } = lib;
const CLI = join(ROOT, 'dist', 'cli.js');
const A_DAY_AHEAD = () => testHooks({ IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS: String(24 * 3600 * 1000) });

afterAll(() => dropTables());

/** A completed and a failed record with a one-minute ttl, and a pending claim whose owner died. */
async function records(store: InstanceType<typeof SqliteStore>): Promise<string[]> {
  const ok = idempotent(async function kept(n: number) {
    return { secret: `result ${n}` };
  }, { store, ttlMs: 60_000 });
  const bad = idempotent(async function broke() {
    throw new Error('declined');
  }, { store, ttlMs: 60_000 });
  await ok(1);
  await bad().catch(() => {});
  await store.acquire({ key: 'orphan', name: 'kept', fingerprint: 'fp', leaseMs: 1, ttlMs: 60_000, force: false });
  return [ok.keyFor(1), bad.keyFor(), 'orphan'];
}

const keys = async (store: InstanceType<typeof SqliteStore>) => (await store.listRecords()).map((r) => r.key).sort();

describe('SqliteStore deletes expired records (issue 21 item 7)', () => {
  it('when a store opens: settled expired records go, a pending one stays', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path });
    const [done, failed] = await records(store);
    expect(await keys(store)).toEqual([done, failed, 'orphan'].sort());

    // Before: the records stayed in the file, results and all, only hidden.
    const opened = await runNode(['-e', `
      const { SqliteStore } = require(${JSON.stringify(ROOT)});
      const store = new SqliteStore({ path: ${JSON.stringify(path)} });
      store.ready().then(() => store.close()).then(() => console.log('opened'));
    `], { env: A_DAY_AHEAD() });
    expect(opened.stderr).toBe('');
    expect(opened.stdout.trim()).toBe('opened');
    expect(await keys(store)).toEqual(['orphan']);
    expect((await store.get('orphan'))?.status).toBe('pending');
    await store.close();
  });

  it('while a store is open, every pruneIntervalMs', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path });
    await store.ready();
    const child = spawn(process.execPath, ['-e', `
      const { SqliteStore } = require(${JSON.stringify(ROOT)});
      const store = new SqliteStore({ path: ${JSON.stringify(path)}, pruneIntervalMs: 20 });
      store.ready().then(() => console.log('open'));
      process.stdin.on('end', () => store.close());
      process.stdin.resume();
    `], { cwd: ROOT, env: { ...process.env, ...A_DAY_AHEAD() } });
    try {
      await lineFrom(child, /^open$/);
      // Written after the child opened: only its periodic passes can delete them.
      const [done, failed] = await records(store);
      await expect.poll(() => keys(store), { timeout: 30_000, interval: 20 }).toEqual(['orphan']);
      expect(await store.get(done)).toBeNull();
      expect(await store.get(failed)).toBeNull();
    } finally {
      child.stdin!.end();
      await new Promise((done) => child.on('close', done));
      await store.close();
    }
  });

  it('checks pruneIntervalMs', () => {
    expect(() => new SqliteStore({ path: tempDb(), pruneIntervalMs: 0 })).toThrow(/SqliteStore: pruneIntervalMs must be/);
    expect(() => new SqliteStore({ path: tempDb(), pruneIntervalMs: Infinity })).toThrow(RangeError);
    expect(() => new SqliteStore({ path: tempDb(), pruneIntervalMs: '1s' as never })).toThrow(RangeError);
  });

  it('prune deletes settled expired records only, never a pending one', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path });
    await records(store);
    await store.close();
    const pruned = await runNode(['-e', `
      const { SqliteStore } = require(${JSON.stringify(ROOT)});
      const store = new SqliteStore({ path: ${JSON.stringify(path)}, pruneIntervalMs: 3600000 });
      store.prune().then((n) => console.log(n)).then(() => store.close());
    `], { env: A_DAY_AHEAD() });
    expect(pruned.stderr).toBe('');
    // The open's own pass deleted the two settled ones already; prune() finds nothing
    // more, and the orphaned claim is still there to be taken over. Before: 3 (the
    // orphan too).
    expect(pruned.stdout.trim()).toBe('0');
    const after = new SqliteStore({ path });
    expect(await keys(after)).toEqual(['orphan']);
    await after.close();
  });
});

describe('PostgresStore.prune() (issue 21 item 7)', () => {
  it('deletes settled expired rows only, never a pending one', async () => {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
    const done = idempotent(async function done() {
      return 1;
    }, { store, ttlMs: 60_000 });
    await done();
    await store.acquire({ key: 'orphan', name: 'done', fingerprint: 'fp', leaseMs: 1, ttlMs: 60_000, force: false });
    // Both past their expiry, the orphan's owner long dead. Before: prune() deleted both.
    await sql(`UPDATE "${table}" SET expires_at = 1, lease_expires_at = 1`);
    expect(await store.prune()).toBe(1);
    const rows = await sql(`SELECT key, status FROM "${table}"`);
    expect(rows.rows).toEqual([{ key: 'orphan', status: 'pending' }]);
    await store.close();
  });
});

describe('PostgresStore deletes expired rows by itself (issue 21 item 7)', () => {
  it('on open and every pruneIntervalMs: settled expired rows go, a pending one stays', async () => {
    const table = uniqueTable();
    const writer = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 }); // this one never prunes
    const done = idempotent(async function done(n: number) {
      return n;
    }, { store: writer, ttlMs: 60_000 });
    await done(1);
    await writer.acquire({ key: 'orphan', name: 'done', fingerprint: 'fp', leaseMs: 1, ttlMs: 60_000, force: false });
    await sql(`UPDATE "${table}" SET expires_at = 1, lease_expires_at = 1`);
    // Before: nothing but prune() (or the CLI's prune) ever deleted them.
    const pruning = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 20 });
    try {
      await pruning.ready();
      const keys = async () => (await sql(`SELECT key FROM "${table}" ORDER BY key`)).rows.map((r) => r.key);
      await expect.poll(keys, { timeout: 30_000, interval: 20 }).toEqual(['orphan']);
      await done(2);
      await sql(`UPDATE "${table}" SET expires_at = 1 WHERE key = $1`, [done.keyFor(2)]);
      await expect.poll(keys, { timeout: 30_000, interval: 20 }).toEqual(['orphan']);
    } finally {
      await pruning.close();
      await writer.close();
    }
  });

  it('checks pruneIntervalMs (0: never by itself)', () => {
    expect(() => new lib.PostgresStore({ url: PG_URL, pruneIntervalMs: -1 })).toThrow(/PostgresStore: pruneIntervalMs must be/);
    expect(() => new lib.PostgresStore({ url: PG_URL, pruneIntervalMs: Infinity })).toThrow(RangeError);
    expect(() => new lib.PostgresStore({ url: PG_URL, pruneIntervalMs: '1m' as never })).toThrow(RangeError);
  });
});

describe('the CLI says how much is kept (issue 21 item 7)', () => {
  it('stats: the records kept and how expired ones are deleted (SQLite)', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path });
    await records(store);
    await store.close();
    const r = await runNode([CLI, '--db', path, 'stats']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^kept\s+3 records \(1 completed, 1 pending, 1 failed; 0 expired, not yet deleted\)$/m);
    expect(r.stdout).toMatch(/^retention\s+expired records are deleted when a store opens, and every minute while one is open$/m);
  });

  it('inspect and stats on Postgres: how many expired records the table still holds, and how to delete them', async () => {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
    const charge = idempotent(async function charge(order: string) {
      return { charged: order };
    }, { store, ttlMs: 60_000 });
    await charge('o-1');
    await charge('o-2');
    await sql(`UPDATE "${table}" SET expires_at = 1 WHERE key = $1`, [charge.keyFor('o-1')]);
    await store.close();
    const inspect = await runNode([CLI, '--postgres', PG_URL, '--table', table, 'inspect']);
    expect(inspect.code).toBe(0);
    expect(inspect.stdout).toContain(charge.keyFor('o-2'));
    expect(inspect.stdout).not.toContain(charge.keyFor('o-1'));
    expect(inspect.stderr).toMatch(/1 expired record is still in .*: hidden from calls and from this list; delete it with: idempotent-tools prune/);
    const stats = await runNode([CLI, '--postgres', PG_URL, '--table', table, 'stats']);
    expect(stats.stdout).toMatch(/^kept\s+2 records \(1 completed, 0 pending, 0 failed; 1 expired, not yet deleted\)$/m);
    expect(stats.stdout).toMatch(/^retention\s+expired records are deleted by the application's stores \(when made, then every minute\), or now by: idempotent-tools prune$/m);
    const json = await runNode([CLI, '--postgres', PG_URL, '--table', table, 'inspect', '--json']);
    expect(json.stderr).toBe(''); // machine-readable output says nothing extra
  });
});
