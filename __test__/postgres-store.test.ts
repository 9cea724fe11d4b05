// PostgresStore's own promises, beyond the conformance suite: options, the record's
// metadata, exact text, bad input, expiry and prune.

import { afterAll, describe, expect, it } from 'vitest';

import { lib } from './helpers';
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
