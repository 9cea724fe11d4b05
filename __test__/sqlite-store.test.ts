// The SQLite file itself: permissions, foreign and corrupt files, unwritable paths.

import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT, lib, runNode, tempDir } from './helpers';

const { idempotent, SqliteStore, StoreError } = lib;

function mkfifo(path: string): void {
  const made = spawnSync('mkfifo', ['-m', '0600', path]);
  expect(made.status, String(made.stderr)).toBe(0);
}

async function refusedWithoutRunning(store: InstanceType<typeof SqliteStore>, path: string, pattern: RegExp) {
  let runs = 0;
  const charge = idempotent(async function charge() {
    runs++;
  }, { store });
  const err = await charge().then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(StoreError);
  expect((err as InstanceType<typeof StoreError>).code).toBe('STORE_ERROR');
  expect((err as Error).message).toContain(path);
  expect((err as Error).message).toMatch(pattern);
  expect(runs).toBe(0);
  await expect(store.ready()).rejects.toBeInstanceOf(StoreError);
}

describe('SqliteStore files', () => {
  it('a process stays alive until its writes are answered, and exits on its own with the store left open', async () => {
    // The writes' promises are answered through one threadsafe function per store, which
    // holds the process open only while a promise is pending: a script whose only work is
    // a call must not exit before the commit, nor hang after it.
    const path = join(tempDir(), 'store.db');
    const script = `
      const { idempotent, SqliteStore } = require(${JSON.stringify(ROOT)});
      const store = new SqliteStore({ path: ${JSON.stringify(path)} });
      const charge = idempotent(async function charge(n) { return { n }; }, { store });
      charge(1).then((r) => charge(1).then((again) => console.log(JSON.stringify([r, again]))));
    `;
    for (const round of [1, 2]) {
      const done = await runNode(['-e', script]);
      expect(done.stderr).toBe('');
      expect([round, done.code, done.stdout.trim()]).toEqual([round, 0, '[{"n":1},{"n":1}]']);
    }
  });

  it('creates missing folders 0700 and the file (and its WAL files) 0600, whatever the umask', async () => {
    const dir = tempDir();
    const path = join(dir, 'a', 'b', 'store.db');
    const old = process.umask(0o000);
    try {
      const store = new SqliteStore({ path });
      await idempotent(async function write() { return 1; }, { store })();
      expect(statSync(join(dir, 'a')).mode & 0o777).toBe(0o700);
      expect(statSync(join(dir, 'a', 'b')).mode & 0o777).toBe(0o700);
      for (const f of ['store.db', 'store.db-wal', 'store.db-shm']) {
        expect(statSync(join(dir, 'a', 'b', f)).mode & 0o777).toBe(0o600);
      }
      await store.close();
    } finally {
      process.umask(old);
    }
  });

  it('tightens an existing store file, its -wal and -shm, and its own folder, found loose (issue 9 item 9)', async () => {
    const dir = join(tempDir(), 'private');
    const path = join(dir, 'store.db');
    const first = new SqliteStore({ path });
    await idempotent(async function write() { return 1; }, { store: first })();
    await first.close(); // leaves store.db (and, after a checkpoint, maybe no -wal)
    for (const f of ['store.db-wal', 'store.db-shm']) writeFileSync(join(dir, f), '', { flag: 'a' });
    chmodSync(dir, 0o777);
    for (const f of readdirSync(dir)) chmodSync(join(dir, f), 0o666);

    const store = new SqliteStore({ path });
    await store.ready();
    // Before: all stayed 0666 and SQLite kept writing readable -wal/-shm files.
    for (const f of ['store.db', 'store.db-wal', 'store.db-shm']) expect(statSync(join(dir, f)).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect((await store.get('nothing'))).toBeNull();
    await store.close();
  });

  it('leaves a shared folder (one that holds other files) as it is; the store file is tightened', async () => {
    const dir = tempDir();
    chmodSync(dir, 0o755);
    writeFileSync(join(dir, 'README.md'), 'a project');
    const path = join(dir, 'store.db');
    writeFileSync(path, '');
    chmodSync(path, 0o644);
    const store = new SqliteStore({ path });
    await store.ready();
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o755);
    await store.close();
  });

  it.runIf(process.getuid?.() === 0)("refuses a loose store file that is another user's, saying what to do", async () => {
    const dir = tempDir();
    const path = join(dir, 'store.db');
    const owner = new SqliteStore({ path });
    await idempotent(async function write() { return 1; }, { store: owner })();
    await owner.close();
    chmodSync(path, 0o644);
    chownSync(path, 65534, 65534); // nobody's: not ours (this test runs as root)
    await refusedWithoutRunning(new SqliteStore({ path }), path, /owned by another user.*0644.*chmod 600/s);
    expect(statSync(path).mode & 0o777).toBe(0o644); // not changed
  });

  it('refuses a file that is not a database, naming it, and runs nothing', async () => {
    const path = join(tempDir(), 'notes.db');
    writeFileSync(path, 'these are my notes, not a database\n'.repeat(100));
    await refusedWithoutRunning(new SqliteStore({ path }), path, /not an idempotent-tools store/);
  });

  it("refuses another program's SQLite database and leaves it unchanged", async () => {
    const path = join(tempDir(), 'app.db');
    const made = spawnSync('python3', ['-c', `import sqlite3; c = sqlite3.connect(${JSON.stringify(path)}); c.execute("create table users (id int)"); c.commit()`]);
    expect(made.status).toBe(0);
    chmodSync(path, 0o644); // loose, but not ours to tighten: another program's file
    const before = statSync(path);
    await refusedWithoutRunning(new SqliteStore({ path }), path, /some other program/);
    const after = statSync(path);
    expect(after.size).toBe(before.size);
    expect(after.mtimeMs).toBe(before.mtimeMs);
    expect(after.mode).toBe(before.mode);
  });

  it('refuses a path it cannot create, naming it', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a-file'), '');
    const path = join(dir, 'a-file', 'store.db'); // its "folder" is a file
    await refusedWithoutRunning(new SqliteStore({ path }), path, /cannot/);
  });

  it('refuses a folder as the store file', async () => {
    const path = join(tempDir(), 'folder.db');
    mkdirSync(path);
    await refusedWithoutRunning(new SqliteStore({ path }), path, /.+/);
  });

  // Issue 21 item 5. Before: ready() and every call waited forever (SQLite, and the
  // permission check before it, blocked opening the FIFO for reading).
  const specials: Array<[string, (dir: string) => { path: string; named: string }]> = [
    ['a FIFO at the path', (dir) => {
      const path = join(dir, 'store.db');
      mkfifo(path);
      return { path, named: path };
    }],
    ['a FIFO owned by another user', (dir) => {
      const path = join(dir, 'store.db');
      mkfifo(path);
      chownSync(path, 65534, 65534);
      chmodSync(path, 0o600);
      return { path, named: path };
    }],
    ['a symlink to a FIFO', (dir) => {
      const fifo = join(dir, 'pipe');
      mkfifo(fifo);
      const path = join(dir, 'store.db');
      symlinkSync(fifo, path);
      return { path, named: path };
    }],
    ['a FIFO at the -wal file beside a missing store', (dir) => {
      const path = join(dir, 'store.db');
      mkfifo(`${path}-wal`);
      return { path, named: `${path}-wal` };
    }],
  ];

  it.each(specials)('refuses %s with a StoreError naming it, before SQLite opens it (issue 21 item 5)', async (_, make) => {
    const { path, named } = make(tempDir());
    await refusedWithoutRunning(new SqliteStore({ path }), path, /not a regular file/);
    const err = await new SqliteStore({ path }).ready().then(() => undefined, (e: unknown) => e);
    expect((err as Error).message).toContain(`${named} is a FIFO`);
  });

  it('checks its options when constructed', () => {
    expect(() => new SqliteStore({ path: '' })).toThrow(TypeError);
    expect(() => new SqliteStore({ durability: 'sometimes' as never })).toThrow(/durability/);
    expect(() => new SqliteStore({ busyTimeoutMs: -1 })).toThrow(RangeError);
    expect(() => new SqliteStore({ file: 'x' } as never)).toThrow(/unknown option "file"/);
    // Strings that napi would change on the way in (lone surrogates become U+FFFD).
    expect(() => new SqliteStore({ path: join(tempDir(), 'a-\uD800.db') })).toThrow(/surrogate/);
    expect(() => new SqliteStore({ path: join(tempDir(), 'x.db'), namespace: 'shop\uDC00' })).toThrow(/surrogate/);
    expect(() => new SqliteStore({ path: join(tempDir(), 'x.db'), namespace: 'shop \uD83D\uDE00' })).not.toThrow();
  });

  it('defaultStore() uses IDEMPOTENT_TOOLS_DB, and is one store per path', async () => {
    const path = join(tempDir(), 'env', 'store.db');
    const old = process.env.IDEMPOTENT_TOOLS_DB;
    process.env.IDEMPOTENT_TOOLS_DB = path;
    try {
      const store = lib.defaultStore();
      expect(store.path).toBe(path);
      expect(lib.defaultStore()).toBe(store);
      let runs = 0;
      const op = idempotent(async function op() { return ++runs; });
      expect(await op()).toBe(1);
      expect(await op()).toBe(1);
      expect((await store.listRecords()).length).toBe(1);
      await store.close();
      expect(lib.defaultStore()).not.toBe(store); // a closed default is replaced
    } finally {
      if (old === undefined) delete process.env.IDEMPOTENT_TOOLS_DB;
      else process.env.IDEMPOTENT_TOOLS_DB = old;
    }
  });

  it('a closed store refuses calls with a StoreError', async () => {
    const store = new SqliteStore({ path: join(tempDir(), 's.db') });
    await store.close();
    let runs = 0;
    await expect(idempotent(async function op() { runs++; }, { store })()).rejects.toBeInstanceOf(StoreError);
    expect(runs).toBe(0);
  });
});

describe('SqliteStore keeps any text exactly (issue 9 items 1, 2)', () => {
  const deep = (n: number): unknown => (n === 0 ? [] : [deep(n - 1)]);
  const cases: Array<[string, unknown]> = [
    ['a lone high surrogate', 'cut emoji \uD83D'],
    ['a lone low surrogate in an object', { b: 'x\uDC00', a: 1 }],
    ['1000 levels of nesting', deep(999)],
  ];

  it.each(cases)('%s: stored through the store interface and given back', async (_, value) => {
    const store = new SqliteStore({ path: join(tempDir(), 'store.db') });
    const claim = await store.acquire({ key: 'k', name: 'n', fingerprint: 'fp', leaseMs: 10_000, force: false });
    if (!claim.acquired) throw new Error('not acquired');
    // Before: StoreError ("the result to store is not valid JSON text"), the record stayed pending.
    await expect(store.complete({ key: 'k', token: claim.token, resultJson: JSON.stringify(value) })).resolves.toBe(true);
    const record = await store.get('k');
    expect(record?.status).toBe('completed');
    expect(record?.result).toEqual(value);
    expect(store.peekReplay('k', 'fp')?.result).toEqual(value);
    await store.close();
  });

  // The wrapper's own limit is 100 levels (deeper is the "completed, unstorable" TypeError,
  // results.test.ts); the store itself keeps any depth (above).
  const wrapped = cases.map(([what, value]) =>
    what === '1000 levels of nesting' ? (['100 levels of nesting (the wrapper\'s limit)', deep(99)] as const) : ([what, value] as const),
  );
  it.each(wrapped)('%s: the wrapped call runs once and replays it', async (_, value) => {
    const store = new SqliteStore({ path: join(tempDir(), 'store.db') });
    let runs = 0;
    const tool = idempotent(async function tool(id: number) {
      runs++;
      return id === 1 ? value : null; // the value itself: 1000 levels is the most the wrapper accepts
    }, { store, leaseMs: 10_000 });
    for (let i = 0; i < 3; i++) expect(await tool(1)).toEqual(value);
    expect(runs).toBe(1);
    await store.close();
  });

  it('an error whose message holds a lone surrogate is recorded as failed', async () => {
    const store = new SqliteStore({ path: join(tempDir(), 'store.db') });
    const claim = await store.acquire({ key: 'k', name: 'n', fingerprint: 'fp', leaseMs: 10_000, force: false });
    if (!claim.acquired) throw new Error('not acquired');
    const error = { name: 'Error\uDBFF', message: 'half \uD800 an emoji' };
    await expect(store.fail({ key: 'k', token: claim.token, error })).resolves.toBe(true);
    expect((await store.get('k'))?.error).toEqual(error);
    await store.close();
  });
});

describe('a store file written by the previous schema (version 1)', () => {
  const V1 = `
    CREATE TABLE records (key TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, fingerprint TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')), token TEXT, result TEXT, error TEXT,
      attempts INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, expires_at INTEGER,
      lease_expires_at INTEGER);
    CREATE INDEX records_by_expiry ON records (expires_at) WHERE expires_at IS NOT NULL;
    PRAGMA application_id = 1229214800; PRAGMA user_version = 1;`;
  const WRITE_V1 = `
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.executescript(sys.argv[2])
c.execute("PRAGMA journal_mode=WAL")
c.execute("INSERT INTO records VALUES (?, 'charge', ?, 'completed', NULL, ?, NULL, 1, 10, 20, NULL, NULL)", (sys.argv[3], sys.argv[4], sys.argv[5]))
c.commit()`;

  it('opens, migrates in place, and keeps its records; a project store replays them', async () => {
    // The key and fingerprint the wrapper gives charge('order-1'), read from a record it wrote.
    const seed = new SqliteStore({ path: join(tempDir(), 'seed.db') });
    const seeded = idempotent(async function charge(order: string) {
      return { order };
    }, { store: seed });
    await seeded('order-1');
    const key = seeded.keyFor('order-1');
    const fingerprint = (await seed.get(key))!.fingerprint;
    await seed.close();
    // The record a previous version wrote for that call, in a file of its schema.
    const path = join(tempDir(), 'old.db');
    const made = spawnSync('python3', ['-c', WRITE_V1, path, V1, key, fingerprint, '{"order":"order-1","charged":"once"}']);
    expect(made.status, String(made.stderr)).toBe(0);

    const plain = new SqliteStore({ path });
    const kept = await plain.get(key);
    expect([kept?.status, kept?.result, kept?.createdAt, kept?.namespace]).toEqual(['completed', { order: 'order-1', charged: 'once' }, 10, '']);
    await plain.close();

    // The project's store (as defaultStore() opens it) replays the old record: no second charge.
    let runs = 0;
    const store = new SqliteStore({ path, namespace: 'shop' });
    const charge = idempotent(async function charge(order: string) {
      runs++;
      return { order, charged: 'again' };
    }, { store });
    expect(await charge('order-1')).toEqual({ order: 'order-1', charged: 'once' });
    expect(runs).toBe(0);
    await store.close();
  });
});

describe('SqliteStore keeps the call metadata', () => {
  it('meta from the claim, durationMs from the settle, and the namespace', async () => {
    const store = new SqliteStore({ path: join(tempDir(), 'store.db'), namespace: 'shop' });
    const meta = { scope: 'thread-1', toolCallId: 'call_0', framework: 'langgraph', project: 'shop' };
    const claim = await store.acquire({ key: 'k', name: 'n', fingerprint: 'fp', leaseMs: 10_000, force: false, meta });
    if (!claim.acquired) throw new Error('not acquired');
    const pending = await store.get('k');
    expect([pending?.meta, pending?.durationMs, pending?.namespace]).toEqual([meta, null, 'shop']);
    await store.complete({ key: 'k', token: claim.token, resultJson: '1', durationMs: 41.6 });
    const done = await store.get('k');
    expect([done?.meta, done?.durationMs]).toEqual([meta, 42]);
    expect((await store.listRecords())[0]).toMatchObject({ meta, durationMs: 42, namespace: 'shop' });
    await store.close();
  });
});

describe('SqliteStore replays in one crossing (issue 24)', () => {
  it('a replay under a derived key hashes and reads in one native call, with the same outcomes as the full path', async () => {
    const native = require(join(ROOT, 'dist', 'core', 'native.js'));
    const proto = native.NativeSqliteStore.prototype;
    const calls: string[] = [];
    const originals = { replayCall: proto.replayCall, peekReplay: proto.peekReplay, callHashes: native.callHashes };
    proto.replayCall = function (this: unknown, ...a: unknown[]) {
      calls.push('replayCall');
      return originals.replayCall.apply(this, a);
    };
    proto.peekReplay = function (this: unknown, ...a: unknown[]) {
      calls.push('peekReplay');
      return originals.peekReplay.apply(this, a);
    };
    native.callHashes = (...a: unknown[]) => {
      calls.push('callHashes');
      return originals.callHashes(...a);
    };
    const store = new SqliteStore({ path: join(tempDir(), 'one-crossing.db') });
    try {
      let runs = 0;
      const body = async function oneCrossing(kind: string) {
        runs++;
        if (kind === 'undefined') return undefined;
        if (kind === 'unstorable') return { n: 10n };
        return { kind, at: [1, 'é', null] };
      };
      const f = idempotent(body, { store });
      const outcomes = async () =>
        Promise.all(['plain', 'undefined', 'unstorable'].map((k) => f(k).then((v) => ['ok', v], (e: Error) => [e.name, e.message])));
      const first = await outcomes();
      calls.length = 0;
      expect(await outcomes()).toEqual(first); // replays: the same values, the same error
      expect(runs).toBe(3);
      expect(calls).toEqual(['replayCall', 'replayCall', 'replayCall']); // nothing else crossed
      // With an event listener the full path runs (its events carry the key), and agrees.
      calls.length = 0;
      const events: string[] = [];
      const g = idempotent(body, { store, onEvent: (e) => events.push(e.type) });
      expect(await Promise.all(['plain', 'undefined', 'unstorable'].map((k) => g(k).then((v) => ['ok', v], (e: Error) => [e.name, e.message])))).toEqual(first);
      expect(events).toEqual(['replayed', 'replayed', 'replayed']);
      expect(calls).not.toContain('replayCall');
      expect(runs).toBe(3);
    } finally {
      Object.assign(proto, { replayCall: originals.replayCall, peekReplay: originals.peekReplay });
      native.callHashes = originals.callHashes;
      await store.close();
    }
  });
});
