// PostgresStore's own promises, beyond the conformance suite: options, the record's
// metadata, exact text, bad input, expiry and prune.

import { afterAll, describe, expect, it } from 'vitest';

import { join } from 'node:path';

import { ROOT, lib } from './helpers';
import { PG_URL, dropTables, sql, uniqueTable } from './postgres-server';

afterAll(() => dropTables());

const open = () => new lib.PostgresStore({ url: PG_URL, table: uniqueTable() });

describe('PostgresStore', () => {
  it('bad options are TypeErrors or RangeErrors that name the option; the password never shows', () => {
    expect(() => new lib.PostgresStore({ url: PG_URL, prefix: 'x' } as never)).toThrow(/unknown option "prefix"/);
    expect(() => new lib.PostgresStore({ url: 'redis://h' })).toThrow(/postgres:\/\//);
    expect(() => new lib.PostgresStore({ url: PG_URL, poolSize: 0 })).toThrow(RangeError);
    expect(() => new lib.PostgresStore({ url: PG_URL, table: 'a.b.c' })).toThrow(/invalid table name/);
    const saved = process.env.DATABASE_URL;
    delete process.env.DATABASE_URL;
    try {
      expect(() => new lib.PostgresStore()).toThrow(/DATABASE_URL/);
    } finally {
      if (saved !== undefined) process.env.DATABASE_URL = saved;
    }
    const s = new lib.PostgresStore({ url: 'postgres://app:s3cret-pw@db.example:5432/orders?sslmode=verify-full' });
    expect(s.path).toBe('postgres://app:***@db.example:5432/orders?sslmode=verify-full');
  });

  it('keeps meta and durationMs with the record, and result text exactly', async () => {
    const store = open();
    const claim = await store.acquire({ key: 'k', name: 'n', fingerprint: 'fp', leaseMs: 30_000, force: false, meta: { scope: 'thread-1', framework: 'langgraph' } });
    expect(claim.acquired).toBe(true);
    const text = '{"z":"\\ud800","a":[1,2.50,"é"]}';
    expect(await store.complete({ key: 'k', token: (claim as { token: string }).token, resultJson: text, durationMs: 12.5 })).toBe(true);
    const r = await store.get('k');
    expect(r?.meta).toEqual({ scope: 'thread-1', framework: 'langgraph' });
    expect(r?.durationMs).toBe(12.5);
    expect(r?.result).toEqual(JSON.parse(text));
    const raw = await sql(`SELECT result FROM "${store.table}" WHERE key = 'k'`);
    expect(raw.rows[0].result).toBe(text);
    await store.close();
  });

  it('a key PostgreSQL text cannot hold is a StoreError before fn runs', async () => {
    const store = open();
    let runs = 0;
    const f = lib.idempotent(async function f() {
      runs++;
    }, { store });
    await expect(f.withKey('a\u0000b')()).rejects.toThrow(/U\+0000/);
    expect(runs).toBe(0);
    await store.close();
  });

  it('expired records count as absent; prune deletes them and keeps the rest', async () => {
    // pruneIntervalMs 0: the store's own passes would race the UPDATE below.
    const store = new lib.PostgresStore({ url: PG_URL, table: uniqueTable(), pruneIntervalMs: 0 });
    let runs = 0;
    const f = lib.idempotent(async function f(x: number) {
      runs++;
      return x;
    }, { store, ttlMs: 60_000 });
    await f(1);
    await f(2);
    await sql(`UPDATE "${store.table}" SET expires_at = 1 WHERE key = $1`, [f.keyFor(1)]);
    expect(await store.get(f.keyFor(1))).toBeNull();
    expect((await store.stats()).expired).toBe(1);
    expect(await store.prune()).toBe(1);
    expect((await store.listRecords()).map((r) => r.key)).toEqual([f.keyFor(2)]);
    await f(1);
    expect(runs).toBe(3);
    await store.close();
  });
});

/**
 * A transaction of the test's own holding `key`'s row (as another process's statement or an
 * idempotentTx call would), and a wait until a statement of the store waits on it.
 */
async function holdRow(table: string, key: string, change: string) {
  const { Client } = await import('pg');
  const held = new Client({ connectionString: PG_URL });
  await held.connect();
  await held.query('BEGIN');
  await held.query(`UPDATE "${table}" SET ${change} WHERE key = $1`, [key]);
  const { rows } = await held.query('SELECT pg_backend_pid() AS pid');
  return {
    /** Resolves once another session waits on this transaction's row lock. */
    async waitedOn(): Promise<void> {
      for (;;) {
        const { rows: w } = await sql('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))', [rows[0].pid]);
        if (w[0].n >= 1) return;
        await new Promise((r) => setImmediate(r)); // ask the server again
      }
    },
    async commit(): Promise<void> {
      await held.query('COMMIT');
      await held.end();
    },
  };
}

describe('PostgresStore statements that waited on a row lock answer from the row as it is after the wait', () => {
  it('acquire: a claim that waited on a transaction that settled an expired record anew answers with the new record, not the expired one', async () => {
    const store = open();
    const claim = await store.acquire({ key: 'k', name: 'n', fingerprint: 'fp', leaseMs: 30_000, force: false });
    expect(await store.complete({ key: 'k', token: (claim as { token: string }).token, resultJson: '{"run":1}', ttlMs: 60_000 })).toBe(true);
    await sql(`UPDATE "${store.table}" SET expires_at = updated_at WHERE key = 'k'`); // expired
    // Another writer (an idempotentTx call, say) holds the row and settles it anew.
    const held = await holdRow(store.table, 'k', `result = '{"run":2}', updated_at = updated_at + 1, expires_at = updated_at + 60000000`);
    const second = store.acquire({ key: 'k', name: 'n', fingerprint: 'fp', leaseMs: 30_000, force: false });
    await held.waitedOn();
    await held.commit();
    const out = await second;
    expect(out.acquired).toBe(false);
    expect(out.acquired === false && out.record.result).toEqual({ run: 2 });
    await store.close();
  });

  it('complete: a settle that waited on the same settle applied by a first attempt still in flight says it settled', async () => {
    const store = open();
    const claim = await store.acquire({ key: 'k', name: 'n', fingerprint: 'fp', leaseMs: 30_000, force: false });
    const token = (claim as { token: string }).token;
    // The first attempt (its reply lost, its statement still running on the server)
    // applies the very settle that is sent again below.
    const held = await holdRow(
      store.table,
      'k',
      `status = 'completed', token = NULL, settled_token = '${token}', result = '{"ok":1}', lease_expires_at = NULL`,
    );
    const again = store.complete({ key: 'k', token, resultJson: '{"ok":1}' });
    await held.waitedOn();
    await held.commit();
    expect(await again).toBe(true); // false before: the statement trusted its snapshot (still pending)
    await store.close();
  });
});

describe('PostgresStore batches', () => {
  it('claims and completions go in batches, at most 2 of a kind outstanding; every call gets its own answer', async () => {
    const native = require(join(ROOT, 'dist', 'core', 'native.js'));
    const proto = native.NativePostgresStore.prototype;
    const counts = { acquireBatch: { out: 0, most: 0, sizes: [] as number[] }, completeBatch: { out: 0, most: 0, sizes: [] as number[] } };
    const originals = { acquireBatch: proto.acquireBatch, completeBatch: proto.completeBatch };
    for (const kind of ['acquireBatch', 'completeBatch'] as const) {
      proto[kind] = async function (this: unknown, reqs: unknown[]) {
        const c = counts[kind];
        c.sizes.push(reqs.length);
        c.most = Math.max(c.most, ++c.out);
        try {
          return await originals[kind].call(this, reqs);
        } finally {
          c.out--;
        }
      };
    }
    const store = open();
    try {
      const f = lib.idempotent(async function batchedCall(n: number) {
        return { n };
      }, { store });
      const all = Array.from({ length: 200 }, (_, n) => n);
      // 64 in flight, as a busy agent host would have them.
      const out: unknown[] = [];
      let next = 0;
      await Promise.all(Array.from({ length: 64 }, async () => {
        while (next < all.length) {
          const n = next++;
          out[n] = await f(n);
        }
      }));
      expect(out).toEqual(all.map((n) => ({ n })));
      for (const c of Object.values(counts)) {
        expect(c.most).toBeLessThanOrEqual(2);
        expect(c.sizes.reduce((a, b) => a + b, 0)).toBe(200);
        expect(c.sizes.length).toBeLessThan(200 / 4); // batches, not one statement a call
      }
      expect(await Promise.all(all.map((n) => f(n)))).toEqual(all.map((n) => ({ n }))); // replays
    } finally {
      Object.assign(proto, originals);
      await store.close();
    }
  });
});
