// `inspect`'s filters, key prefixes, JSON lines and --follow, through the real CLI.

import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, runNode, tempDb } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const require = createRequire(import.meta.url);
const query: typeof import('../dist/core/record-query.js') = require(join(ROOT, 'dist', 'core', 'record-query.js'));
type IdempotencyRecord = import('../dist/core/store.js').IdempotencyRecord;

const CLI = join(ROOT, 'dist', 'cli.js');
const cli = (...args: string[]) => runNode([CLI, ...args]);
const keysOf = (stdout: string) => (JSON.parse(stdout) as IdempotencyRecord[]).map((r) => r.key).sort();

let db: string;
let chargeKey: string;

beforeAll(async () => {
  db = tempDb();
  const store = new lib.SqliteStore({ path: db });
  const refund = lib.idempotent(async function refund(order: string) {
    return { refunded: order };
  }, { store });
  const charge = lib.idempotent(async function charge(order: string) {
    if (order === 'bad') throw new Error('card declined');
    return { charged: order };
  }, { store });
  await refund.withKey('refund-a1')('o-1');
  await refund.withKey('refund-a2')('o-2');
  await refund.withKey('refund-b1')('o-3');
  await charge('o-4');
  chargeKey = charge.keyFor('o-4');
  await charge.withKey('charge-bad')('bad').catch(() => {});
  await store.acquire({ key: 'stuck-1', name: 'charge', fingerprint: 'fp', leaseMs: 600_000, force: false });
  await store.close();
});

describe('inspect filters', () => {
  it('--name, --status and both together', async () => {
    expect(keysOf((await cli('--db', db, 'inspect', '--name', 'refund', '--json')).stdout)).toEqual(['refund-a1', 'refund-a2', 'refund-b1']);
    expect(keysOf((await cli('--db', db, 'inspect', '--status', 'failed', '--json')).stdout)).toEqual(['charge-bad']);
    expect(keysOf((await cli('--db', db, 'inspect', '--status', 'completed', '--name', 'charge', '--json')).stdout)).toEqual([chargeKey]);
    const none = await cli('--db', db, 'inspect', '--name', 'nothing');
    expect(none.code).toBe(0);
    expect(none.stdout).toMatch(/No records match/);
  });

  it('--limit keeps the newest, and says how many were left out', async () => {
    const all = JSON.parse((await cli('--db', db, 'inspect', '--json')).stdout) as IdempotencyRecord[];
    const two = await cli('--db', db, 'inspect', '--limit', '2');
    expect(two.code).toBe(0);
    expect(two.stdout.trim().split('\n')).toHaveLength(3); // header and two rows
    expect(two.stderr).toMatch(/2 of 6 matching records shown/);
    const newest = [...all].sort((a, b) => b.updatedAt - a.updatedAt || (a.key < b.key ? -1 : 1)).slice(0, 2);
    expect(keysOf((await cli('--db', db, 'inspect', '--limit', '2', '--json')).stdout)).toEqual(newest.map((r) => r.key).sort());
  });

  it('--since keeps recent records (the window itself is checked on fixed clocks below)', async () => {
    expect(keysOf((await cli('--db', db, 'inspect', '--since', '1h', '--json')).stdout)).toHaveLength(6);
  });

  it('--jsonl prints one record per line', async () => {
    const r = await cli('--db', db, 'inspect', '--jsonl', '--name', 'refund');
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines.map((l) => JSON.parse(l).name)).toEqual(['refund', 'refund', 'refund']);
  });

  it('the table shows the lease of a stuck record in full view, and a SCOPE column', async () => {
    const table = await cli('--db', db, 'inspect');
    expect(table.stdout.split('\n')[0]).toMatch(/^KEY\s+ID\s+NAME\s+STATUS\s+ATTEMPTS\s+AGE\s+TOOK\s+EXPIRES\s+SCOPE\s+PROJECT$/);
    const stuck = await cli('--db', db, 'inspect', '--key', 'stuck-1');
    expect(stuck.stdout).toMatch(/lease until\s+\S+ \(held for \d+m more: a running owner renews it before then; if its owner stopped, the next call after that takes it over\)/);
    expect(stuck.stdout).not.toMatch(/alive/);
  });

  it('bad filter values are usage errors that say what to give', async () => {
    for (const [args, message] of [
      [['--status', 'done'], /give pending, completed or failed/],
      [['--since', 'yesterday'], /90s, 15m, 1h/],
      [['--limit', '0'], /whole number >= 1/],
      [['--limit', 'ten'], /whole number >= 1/],
      [['--json', '--jsonl'], /not both/],
    ] as const) {
      const r = await cli('--db', db, 'inspect', ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect((await cli('--db', db, 'stats', '--name', 'x')).stderr).toMatch(/--name goes with inspect/);
    for (const [args, message] of [
      [['ui', '--port', 'http'], /not a port/],
      [['ui', '--port', '70000'], /not a port/],
      [['inspect', '--port', '8080'], /--port goes with ui/],
      [['ui', '--key', 'k'], /ui takes no --key/],
      [['inspect', '--follow', '--key', 'k'], /not --key/],
    ] as const) {
      const r = await cli('--db', db, ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
  });
});

describe('--key takes a unique prefix, as git does', () => {
  it('a unique prefix finds the record', async () => {
    const r = await cli('--db', db, 'inspect', '--key', chargeKey.slice(0, 8), '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).key).toBe(chargeKey);
  });

  it('an ambiguous prefix lists the candidates and exits 1', async () => {
    const r = await cli('--db', db, 'inspect', '--key', 'refund-a');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/ambiguous; 2 records start with it/);
    expect(r.stderr).toContain('refund-a1');
    expect(r.stderr).toContain('refund-a2');
    expect(r.stderr).not.toContain('refund-b1');
  });

  it('a whole key wins over a longer key it is the start of', async () => {
    const r = await cli('--db', db, 'inspect', '--key', 'refund-a1', '--json');
    expect(JSON.parse(r.stdout).key).toBe('refund-a1');
  });

  it('release and clear take prefixes too, and name the whole key', async () => {
    const path = tempDb();
    const store = new lib.SqliteStore({ path });
    await store.acquire({ key: 'stuck-order-77', name: 'op', fingerprint: 'fp', leaseMs: 600_000, force: false });
    await store.close();
    const released = await cli('--db', path, 'release', '--key', 'stuck-o');
    expect(released.code).toBe(0);
    expect(released.stdout).toContain('Released stuck-order-77');
    const cleared = await cli('--db', path, 'clear', '--key', 'stuck');
    expect(cleared.code).toBe(0);
    expect(cleared.stdout).toContain('stuck-order-77');
  });
});

describe('record-query on fixed clocks', () => {
  const now = 1_000_000_000;
  const record = (over: Partial<IdempotencyRecord>): IdempotencyRecord => ({
    key: 'k', name: 'refund', status: 'completed', result: null, error: null, attempts: 1,
    createdAt: now, updatedAt: now, expiresAt: null, fingerprint: 'fp', leaseExpiresAt: null,
    meta: null, durationMs: null, ...over,
  });

  it('--since compares the last change with now', () => {
    const q = query.parseQuery({ since: '1h30m' });
    expect(q.sinceMs).toBe(5_400_000);
    expect(query.matches(record({ updatedAt: now - 5_400_000 }), q, now)).toBe(true);
    expect(query.matches(record({ updatedAt: now - 5_400_001 }), q, now)).toBe(false);
  });

  it('--scope matches the whole scope or one of its /, :, # parts, never a longer id', () => {
    const q = query.parseQuery({ scope: 'thread-7' });
    expect(query.matches(record({ meta: { scope: 'thread-7' } }), q, now)).toBe(true);
    expect(query.matches(record({ meta: { scope: 'thread-7/tools:call_1' } }), q, now)).toBe(true);
    expect(query.matches(record({ meta: { scope: 'thread-77' } }), q, now)).toBe(false);
    expect(query.matches(record({ meta: null }), q, now)).toBe(false);
  });
});

describe('plain inspect over more records than the call stack holds arguments (issue 40 item 4)', () => {
  const format: typeof import('../dist/apps/cli/format.js') = require(join(ROOT, 'dist', 'apps', 'cli', 'format.js'));

  it('the table of 300k rows is drawn, its columns as wide as the widest cell', () => {
    // Above ~130k rows, spreading every row's width into one Math.max call threw
    // "Maximum call stack size exceeded"; 300k is well past that on any V8 stack size.
    const now = 1_000_000_000;
    const rows = Array.from({ length: 300_000 }, (_, i): IdempotencyRecord => ({
      key: `order-${i}`, name: 'refund', status: 'completed', result: null, error: null, attempts: 1,
      createdAt: now, updatedAt: now, expiresAt: null, fingerprint: 'fp', leaseExpiresAt: null,
      meta: null, durationMs: null,
    }));
    const lines = format.table(rows, now).split('\n');
    expect(lines).toHaveLength(300_001);
    // The KEY column is padded to the longest key ('order-299999'), on the first row as on the last.
    expect(lines[1].startsWith(`${'order-0'.padEnd('order-299999'.length)}  -  `)).toBe(true);
    expect(lines[300_000].startsWith('order-299999  -  ')).toBe(true);
  });
});



describe('"did the refund for thread T run?"', () => {
  it('inspect --scope T --name refund answers it', async () => {
    const path = tempDb();
    const store = new lib.SqliteStore({ path });
    for (const [key, scope] of [['r-7', 'thread-7'], ['r-8', 'thread-8'], ['r-77', 'thread-77']]) {
      const c = await store.acquire({ key, name: 'refund', fingerprint: 'fp', leaseMs: 60_000, force: false, meta: { scope } });
      if (c.acquired) await store.complete({ key, token: c.token, resultJson: '{"ok":true}', durationMs: 12 });
    }
    await store.close();
    const r = await cli('--db', path, 'inspect', '--scope', 'thread-7', '--name', 'refund');
    expect(r.code).toBe(0);
    const rows = r.stdout.trim().split('\n');
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatch(/^r-7\s+-\s+refund\s+completed\s+1\s+\S+\s+12ms\s+never\s+thread-7\s+\(none\)$/);
  });
});

function follower(args: string[]): { child: ChildProcess; ready: Promise<string> } {
  const child = spawn(process.execPath, [CLI, ...args, 'inspect', '--follow', '--name', 'refund'], { cwd: ROOT });
  const ready = new Promise<string>((done, fail) => {
    let err = '';
    child.stderr!.on('data', (d) => {
      err += d;
      if (/Following/.test(err)) done(err);
    });
    child.on('close', (code) => fail(new Error(`follower exited (${code}): ${err}`)));
  });
  return { child, ready };
}

describe('inspect --follow', () => {
  const children: ChildProcess[] = [];
  afterAll(() => children.forEach((c) => c.kill()));

  async function followsSettles(storeArgs: string[], store: import('../dist/core/store.js').Store, how: RegExp) {
    const f = follower(storeArgs);
    children.push(f.child);
    expect(await f.ready).toMatch(how);
    const refund = lib.idempotent(async function refund(order: string) {
      if (order === 'bad') throw new Error('bank said no');
      return order;
    }, { store });
    const charge = lib.idempotent(async function charge(order: string) {
      return order;
    }, { store });
    const printed: string[] = [];
    f.child.stdout!.on('data', (d) => printed.push(String(d)));
    await charge('o-1'); // another name: not printed
    // Before the store has a key-id secret (made by the first call whose events someone
    // listens to), a line leaves a derived key out; after, it names it by its keyed id.
    await refund('o-0');
    const keyless = await lineFrom(f.child, /completed/);
    expect(keyless).not.toContain(refund.keyFor('o-0'));
    expect(keyless).toMatch(/completed\s+refund\s+\S+$/);
    await lib.keyId(store, 'make-the-secret');
    await refund('o-1');
    // A line names a derived key by its keyed id, never the key (a follow is a log).
    const completed = await lineFrom(f.child, /completed.*kid_/);
    expect(completed).toContain(await lib.keyId(store, refund.keyFor('o-1')));
    expect(completed).not.toContain(refund.keyFor('o-1'));
    await refund('o-1'); // a replay changes no record: nothing printed
    await refund('bad').catch(() => {});
    const failed = await lineFrom(f.child, /failed/);
    expect(failed).toContain('Error: bank said no');
    expect(failed).toContain(await lib.keyId(store, refund.keyFor('bad')));
    expect(printed.join('')).not.toContain(await lib.keyId(store, charge.keyFor('o-1')));
    expect(printed.join('').trim().split('\n')).toHaveLength(3);
    f.child.kill('SIGINT');
    expect(await new Promise((done) => f.child.on('close', done))).toBe(0);
  }

  it('SQLite: prints calls of the named function as they settle, noticed through data_version', async () => {
    const path = tempDb();
    const store = new lib.SqliteStore({ path });
    await store.ready();
    try {
      await followsSettles(['--db', path], store, /SQLite data_version/);
    } finally {
      await store.close();
    }
  });

  it('--json prints each settled record whole, its result included (the listing itself reads none: issue 21 item 6)', async () => {
    const path = tempDb();
    const store = new lib.SqliteStore({ path });
    await store.ready();
    const child = spawn(process.execPath, [CLI, '--db', path, 'inspect', '--follow', '--json'], { cwd: ROOT });
    children.push(child);
    try {
      await new Promise<void>((done) => {
        let err = '';
        child.stderr!.on('data', (d) => {
          err += d;
          if (/Following/.test(err)) done();
        });
      });
      const refund = lib.idempotent(async function refund(order: string) {
        return { refunded: order, note: 'x'.repeat(1000) };
      }, { store });
      await refund('o-9');
      const line = JSON.parse(await lineFrom(child, /"status":"completed"/));
      expect(line.key).toBe(refund.keyFor('o-9'));
      expect(line.result).toEqual({ refunded: 'o-9', note: 'x'.repeat(1000) });
    } finally {
      child.kill('SIGINT');
      await store.close();
    }
  });

  it('Redis: the same, noticed by a poll', async () => {
    // This file's only Redis test: the server stops with it (it was left running, one
    // redis-server per run of the suite).
    const redis = await sharedRedis();
    const prefix = uniquePrefix();
    const store = new lib.RedisStore({ url: redis.url, prefix });
    try {
      await followsSettles(['--redis', redis.url, '--prefix', prefix], store, /a poll/);
    } finally {
      await store.close();
      await redis.stop();
    }
  });
});

describe('plain inspect shows the newest 1000 rows, and says how many more match (issue 40)', () => {
  it('1003 records: a table of the newest 1000, a note on stderr; --limit and --jsonl give more', async () => {
    const path = tempDb();
    const store = new lib.SqliteStore({ path, durability: 'normal' });
    const op = lib.idempotent(async function op(n: number) { return n; }, { store });
    for (let n = 0; n < 1003; n++) await op(n);
    await store.close();
    const plain = await cli('--db', path, 'inspect');
    expect(plain.code).toBe(0);
    expect(plain.stdout.trim().split('\n')).toHaveLength(1 + 1000);
    expect(plain.stderr).toContain('(the newest 1000 of 1003 matching records shown; --limit N shows another number, --jsonl prints every record)');
    const more = await cli('--db', path, 'inspect', '--limit', '1002');
    expect(more.stdout.trim().split('\n')).toHaveLength(1 + 1002);
    expect(more.stderr).toContain('(1002 of 1003 matching records shown; raise --limit to see more)');
    const all = await cli('--db', path, 'inspect', '--jsonl');
    expect(all.stdout.trim().split('\n')).toHaveLength(1003);
  });
});
