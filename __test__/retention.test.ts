// Issue 21 item 7: expired records are deleted, not only hidden. SQLite prunes when a
// store opens and periodically while it is open; a pending record is never deleted (it is
// taken over). `stats` says how much is kept, `inspect` how many expired records remain.
//
// "Expired" without waiting: a child process whose wall clock (as the store sees it) is a
// day ahead (IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS) sees records with a one-minute
// ttl as expired, while this process still sees them.

import { spawn, spawnSync } from 'node:child_process';
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

describe('SqliteStore.prune() of many expired records (issue 40 item 1)', () => {
  const EXPIRED = 100_000;
  /**
   * Rows as a store writes them, expired long ago (expires_at 1), each with a result: written
   * in one transaction by the test-hooks build (src/sqlite/test_rows.rs), in a child process
   * that loads it, since the public API takes seconds to write this many.
   */
  const fill = (path: string) =>
    spawnSync(process.execPath, ['-e', `require(${JSON.stringify(join(ROOT, 'binding.js'))}).testFillExpired(${JSON.stringify(path)}, '', ${EXPIRED})`], {
      env: { ...process.env, ...testHooks({}) },
    });

  it('another process writing to the file all through it never waits past a short busy timeout', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path, pruneIntervalMs: 3_600_000 });
    await store.ready();
    const filled = fill(path);
    expect(filled.status, String(filled.stderr)).toBe(0);
    // The other process: one write after another (a claim, its own transaction, which
    // fails at once when the lock stays taken past the busy timeout: no retry hides it),
    // with a busy timeout below what one transaction over every expired record holds the
    // lock for (over a second here), and far above what one pass holds it for.
    const child = spawn(process.execPath, ['-e', `
      const { SqliteStore } = require(${JSON.stringify(ROOT)});
      const store = new SqliteStore({ path: ${JSON.stringify(path)}, busyTimeoutMs: 1000, pruneIntervalMs: 3600000 });
      let stop = false, calls = 0, failed = 0, first = '';
      process.stdin.on('end', () => { stop = true; });
      process.stdin.resume();
      (async () => {
        while (!stop) {
          try {
            await store.acquire({ key: 'new-' + calls, name: 'charge', fingerprint: 'fp', leaseMs: 60000, force: false });
          } catch (e) {
            failed += 1;
            first ||= String(e && e.message);
          }
          calls += 1;
          console.log('called ' + calls);
        }
        await store.close();
        console.log('done ' + JSON.stringify({ calls, failed, first }));
      })();
    `], { cwd: ROOT, env: process.env });
    try {
      await lineFrom(child, /^called \d+$/);
      // Calls that the child finished while prune() ran (their lines arrived meanwhile).
      let during = 0;
      const count = (d: Buffer) => { during += String(d).split('\n').filter((l) => l.startsWith('called')).length; };
      child.stdout!.on('data', count);
      const pruned = await store.prune();
      child.stdout!.off('data', count);
      // Before: one transaction deleted them all while the child's calls failed with
      // "database is locked"; now the lock is let go between passes.
      expect(pruned).toBeGreaterThan(EXPIRED / 2); // the rest: the two opens' own first passes
      expect(during).toBeGreaterThan(0);
      const done = lineFrom(child, /^done /);
      child.stdin!.end();
      const outcome = JSON.parse((await done).slice('done '.length)) as { calls: number; failed: number; first: string };
      expect(outcome.first).toBe('');
      expect(outcome.failed).toBe(0);
      // None of the expired records is left (stats counts them without reading results).
      expect((await store.stats()).expired).toBe(0);
    } finally {
      child.stdin!.end();
      if (child.exitCode === null) await new Promise((done) => child.on('close', done));
      await store.close();
    }
  });

  it("a store's own passes (pruneIntervalMs) let another process's writes through as well", async () => {
    const path = tempDb();
    const writer = new SqliteStore({ path, busyTimeoutMs: 1000, pruneIntervalMs: 3_600_000 });
    await writer.ready();
    const filled = fill(path);
    expect(filled.status, String(filled.stderr)).toBe(0);
    // This process writes, one claim after another, until the other one's periodic passes
    // (back to back while they come back full) have deleted every expired record.
    let stop = false;
    const failures: string[] = [];
    let calls = 0;
    const writing = (async () => {
      while (!stop) {
        await writer.acquire({ key: `new-${calls++}`, name: 'charge', fingerprint: 'fp', leaseMs: 60_000, force: false })
          .catch((e: Error) => failures.push(e.message));
      }
    })();
    const child = spawn(process.execPath, ['-e', `
      const { SqliteStore } = require(${JSON.stringify(ROOT)});
      const store = new SqliteStore({ path: ${JSON.stringify(path)}, pruneIntervalMs: 20 });
      store.ready().then(() => console.log('open'));
      process.stdin.on('end', () => store.close());
      process.stdin.resume();
    `], { cwd: ROOT, env: process.env });
    try {
      await lineFrom(child, /^open$/);
      await expect.poll(async () => (await writer.stats()).expired, { timeout: 120_000, interval: 50 }).toBe(0);
      stop = true;
      await writing;
      // Before: passes took the lock back at once, and a claim of this process now and
      // then waited past its busy timeout ('database is locked').
      expect(failures).toEqual([]);
      expect(calls).toBeGreaterThan(0);
    } finally {
      stop = true;
      await writing;
      child.stdin!.end();
      if (child.exitCode === null) await new Promise((done) => child.on('close', done));
      await writer.close();
    }
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
