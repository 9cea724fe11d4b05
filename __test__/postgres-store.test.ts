// PostgresStore's own promises, beyond the conformance suite: options, the record's
// metadata, exact text, bad input, expiry and prune.

import { createRequire } from 'node:module';
import { Client } from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

import { type AddressInfo, type Socket, connect, createServer } from 'node:net';
import { join } from 'node:path';

import { ROOT, lib, runNode } from './helpers';
import { PG_URL, dropTables, sql, uniqueTable } from './postgres-server';

const require = createRequire(import.meta.url);

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

/**
 * A TCP proxy in front of the shared server that counts the bytes the server sends: what
 * a client read, whatever it then kept.
 */
async function countingProxy(): Promise<{ url: string; received: () => number; close: () => Promise<void> }> {
  const target = new URL(PG_URL);
  let received = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    upstream.on('data', (d: Buffer) => { received += d.length; });
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const url = new URL(PG_URL);
  url.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: url.toString(),
    received: () => received,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((done) => server.close(() => done()));
    },
  };
}

describe('PostgresStore listing reads what it shows (issue 40 item 3)', () => {
  const CLI = join(ROOT, 'dist', 'cli.js');
  const ROWS = 2000;
  const RESULT_BYTES = 1920; // each row's result: ~3.8 MB in all

  it('inspect --limit 20 and stats read a bounded number of rows and no results', async () => {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
    await store.migrate();
    await store.close();
    await sql(`INSERT INTO "${table}" (key, name, fingerprint, status, result, attempts, created_at, updated_at)
      SELECT 'k-' || i, 'charge', 'fp', 'completed', '"' || repeat(md5(i::text), 60) || '"', 1, i, i FROM generate_series(1, ${ROWS}) AS i`);
    const proxy = await countingProxy();
    try {
      const before = proxy.received();
      const listed = await runNode([CLI, '--postgres', proxy.url, '--table', table, 'inspect', '--limit', '20']);
      const listing = proxy.received() - before;
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout.trim().split('\n')).toHaveLength(21); // header and the 20 newest
      expect(listed.stdout).toContain(`k-${ROWS}`);
      expect(listed.stderr).toMatch(new RegExp(`20 of ${ROWS} matching records shown`));
      const counted = proxy.received();
      const stats = await runNode([CLI, '--postgres', proxy.url, '--table', table, 'stats']);
      const statsRead = proxy.received() - counted;
      expect(stats.stdout).toMatch(new RegExp(`^completed\\s+${ROWS}$`, 'm'));
      // Before: every row with its result crossed (over ROWS * RESULT_BYTES each time). Now
      // 20 rows and some counts, with the connections' own setup: far under one tenth of it.
      expect(listing).toBeLessThan((ROWS * RESULT_BYTES) / 10);
      expect(statsRead).toBeLessThan((ROWS * RESULT_BYTES) / 10);
    } finally {
      await proxy.close();
    }
  });
});

describe('PostgresStore.prune() costs in proportion to the rows it deletes (issue 40 item 2)', () => {
  const { postgresSql } = require(join(ROOT, 'dist', 'core', 'native.js')) as typeof import('../dist/core/native.js');
  type Plan = { 'Index Name'?: string; 'Shared Hit Blocks': number; 'Shared Read Blocks': number; Plans?: Plan[] };

  /** The buffers a statement touched: its plan's top node counts its children's. */
  function statementBuffers(plan: Plan): number {
    return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
  }

  /**
   * `rows` expired rows (distinct expiries, as calls settled one after another leave them)
   * pruned by the store's statement, walked as the store walks it (src/postgres/mod.rs
   * `prune`), prepared as the store prepares it; before each batch, the batch measured by
   * EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back. The statement's buffers
   * (every index and the table), summed. The table is analyzed first, as autovacuum does
   * after such an insert: the planner's choice at a million rows is the one it makes with
   * statistics that say how many rows have expired.
   */
  async function pruneBuffers(rows: number): Promise<number> {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
    await store.migrate();
    await store.close();
    await sql(`INSERT INTO "${table}" (key, name, fingerprint, status, result, attempts, created_at, updated_at, expires_at)
      SELECT 'k-' || i, 'charge', 'fp', 'completed', '1', 1, i, i, i FROM generate_series(1, ${rows}) AS i`);
    await sql(`ANALYZE "${table}"`);
    const client = new Client({ connectionString: PG_URL });
    await client.connect();
    try {
      await client.query(`PREPARE prune(bigint, bigint) AS ${postgresSql(table).prune}`);
      let buffers = 0;
      let from = '-9223372036854775808';
      let deleted = 0;
      for (;;) {
        await client.query('BEGIN');
        const [explained] = (await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE prune(1000, ${from})`)).rows[0]['QUERY PLAN'] as Array<{ Plan: Plan }>;
        await client.query('ROLLBACK');
        buffers += statementBuffers(explained.Plan);
        const gone = await client.query(`EXECUTE prune(1000, ${from})`);
        deleted += gone.rowCount ?? 0;
        if ((gone.rowCount ?? 0) < 1000) break;
        from = String(gone.rows.reduce((max, r) => Math.max(max, Number(r.expires_at)), -Infinity));
      }
      expect(deleted).toBe(rows);
      return buffers;
    } finally {
      await client.end();
    }
  }

  it('four times the expired rows cost about four times the buffers, not sixteen', async () => {
    const small = await pruneBuffers(10_000);
    const large = await pruneBuffers(40_000);
    // Before, every batch read the whole expiry index (a bitmap scan of every expired
    // entry, deleted ones included, then LIMIT): 28 buffers a batch at 10k rows, 111 at
    // 40k, 549 at 200k, so the whole prune grew with the square of the rows (ratio ~15 here).
    // The whole statement's buffers are counted (the batch's walk, the rows' deletion and
    // any index it reads), so a plan that reads more per batch as the table grows fails here
    // too, whichever part of the statement it is in.
    expect(large).toBeLessThan(small * 8);
  });

  it('a row another session is claiming again is skipped while held (never waited on), and kept once it is pending', async () => {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
    for (const key of ['k', 'other']) {
      const claim = await store.acquire({ key, name: 'n', fingerprint: 'fp', leaseMs: 30_000, force: false });
      expect(await store.complete({ key, token: (claim as { token: string }).token, resultJson: '1', ttlMs: 60_000 })).toBe(true);
    }
    await sql(`UPDATE "${table}" SET expires_at = 1`); // both expired
    // The claim of a new call on the expired record, not committed yet.
    const held = await holdRow(table, 'k', `status = 'pending', expires_at = NULL, updated_at = updated_at + 1`);
    expect(await store.prune()).toBe(1); // 'other'; 'k' is skipped, not waited on (this would hang)
    await held.commit();
    expect(await store.prune()).toBe(0);
    expect((await sql(`SELECT key, status FROM "${table}"`)).rows).toEqual([{ key: 'k', status: 'pending' }]);
    await store.close();
  });

  it('the store\'s prune() walks to the end, past rows of the same expiry', async () => {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
    await store.migrate();
    // 5 batches and a bit; expiries repeat (up to 4 rows each), so batches end inside a group.
    await sql(`INSERT INTO "${table}" (key, name, fingerprint, status, result, attempts, created_at, updated_at, expires_at)
      SELECT 'k-' || i, 'charge', 'fp', 'completed', '1', 1, i, i, 1 + i % 1500 FROM generate_series(1, 5000) AS i`);
    await store.acquire({ key: 'orphan', name: 'charge', fingerprint: 'fp', leaseMs: 1, ttlMs: 60_000, force: false });
    await sql(`UPDATE "${table}" SET expires_at = 1 WHERE key = 'orphan'`);
    expect(await store.prune()).toBe(5000);
    expect((await sql(`SELECT key FROM "${table}"`)).rows).toEqual([{ key: 'orphan' }]);
    await store.close();
  });
});

describe('PostgresStore\'s connections never JIT-compile its statements (issue 40: 100 ms a listing, whatever the table)', () => {
  const { postgresSql } = require(join(ROOT, 'dist', 'core', 'native.js')) as typeof import('../dist/core/native.js');

  // The store's session turns sequential scans off (session.sql), which adds a disable cost of
  // 1e10 to every plan that still scans the table: far past jit_above_cost (100,000), so the
  // server JIT-compiled each run of the listing and stats statements, about 100 ms each on a
  // table of one row. Each statement that reads the whole table, EXPLAIN ANALYZEd on a
  // connection with the store's session: no JIT section in its plan. The control, the same
  // with jit turned back on, must show one where the server can JIT.
  const reads: Array<[string, (s: ReturnType<typeof postgresSql>) => string, string]> = [
    ['list', (s) => s.list, '(NULL, 20)'],
    ['recent', (s) => s.recent, '(NULL, NULL, NULL, false, 20)'],
    ['stats', (s) => s.stats, ''],
  ];

  it.each(reads)('%s', async (_, text, args) => {
    const table = uniqueTable();
    const store = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
    await store.migrate();
    await store.close();
    const statements = postgresSql(table);
    const client = new Client({ connectionString: PG_URL });
    await client.connect();
    try {
      await client.query(statements.session);
      await client.query(`PREPARE s AS ${text(statements)}`);
      const jitted = async () => {
        const [explained] = (await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE s${args}`)).rows[0]['QUERY PLAN'] as Array<{ JIT?: unknown }>;
        return explained.JIT !== undefined;
      };
      expect(await jitted()).toBe(false);
      const { rows } = await client.query('SELECT pg_jit_available() AS available');
      if (rows[0].available) {
        await client.query('SET jit = on');
        expect(await jitted(), 'the control: with jit on, the server JIT-compiles the statement').toBe(true);
      }
    } finally {
      await client.end();
    }
  });
});

describe('PostgresStore.listRecent reads its page and its count in one snapshot', () => {
  it('while another session swaps the records in and out, the count always covers the page', async () => {
    const store = open();
    await store.migrate();
    const table = store.table;
    const writer = new Client({ connectionString: PG_URL });
    await writer.connect();
    // Five records there, then none, then five again, each change one committed transaction.
    let on = true;
    const swapping = (async () => {
      for (let i = 0; on; i++) {
        await writer.query(i % 2
          ? `DELETE FROM "${table}"`
          : `INSERT INTO "${table}" (key, name, fingerprint, status, result, attempts, created_at, updated_at)
             SELECT 'k-' || n, 'charge', 'fp', 'completed', '1', 1, n, n FROM generate_series(1, 5) AS n`);
      }
    })();
    const seen: string[] = [];
    try {
      for (let i = 0; i < 400; i++) {
        const { records, matched } = await store.listRecent!({ limit: 20 });
        // Read at two moments (before: the page, then the count), these disagreed.
        if (matched !== records.length) seen.push(`${records.length} records, ${matched} matched`);
      }
    } finally {
      on = false;
      await swapping;
      await writer.end();
      await store.close();
    }
    expect(seen).toEqual([]);
  });
});
