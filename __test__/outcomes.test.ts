// What fn's outcome does to the record: any thrown value makes a `failed` record (the
// caller gets the value itself); control-flow signals and aborts have their own rules;
// a settle that fails for a moment is retried, and a timed-out settle that was applied
// is not reported as lost.

import { spawn } from 'node:child_process';
import { createConnection } from 'node:net';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';

import { lib, lineFrom, tempDb } from './helpers';
import { RedisServer, sharedRedis, uniquePrefix } from './redis-server';

const { idempotent, SqliteStore, RedisStore, DuplicateInFlightError } = lib;
const redis = await sharedRedis();
afterAll(() => redis.stop());

type AnyStore = InstanceType<typeof SqliteStore> | InstanceType<typeof RedisStore>;
const stores: Array<[string, () => AnyStore]> = [
  ['SqliteStore', () => new SqliteStore({ path: tempDb() })],
  ['RedisStore', () => new RedisStore({ url: redis.url, prefix: uniquePrefix() })],
];

const throwing = new Proxy({}, {
  get() {
    throw new Error('trap');
  },
  getPrototypeOf() {
    throw new Error('trap');
  },
});

const THROWN: Array<[string, () => unknown]> = [
  ['an object with a numeric name', () => ({ name: 42, message: 'x' })],
  ['an Error with a numeric name', () => Object.assign(new Error('m'), { name: 42 })],
  ['an Error with an object message', () => Object.assign(new Error(), { message: { text: 'm' } })],
  ['an object with an object message', () => ({ name: 'E', message: { nested: 1 } })],
  ['an Error whose message holds a lone surrogate', () => new Error('cut \uD83D')],
  ['an Error whose name holds a lone surrogate', () => Object.assign(new Error('m'), { name: 'E\uDC00' })],
  ['getters that throw', () => ({ get name() { throw new Error('no name'); }, get message() { throw new Error('no message'); } })],
  ['a proxy that throws on every trap', () => throwing],
  ['null', () => null],
  ['undefined', () => undefined],
  ['a symbol', () => Symbol('s')],
  ['an object without a prototype (String() throws)', () => Object.create(null)],
  ['a huge string', () => 'x'.repeat(1 << 20)],
];

for (const [storeName, open] of stores) {
  describe(`thrown values on ${storeName}`, () => {
    for (const [what, make] of THROWN) {
      it(`${what}: the record is failed, the caller gets the value itself, the next call runs`, async () => {
        const store = open();
        const value = make();
        let runs = 0;
        const f = idempotent(async function f() {
          runs++;
          if (runs === 1) throw value;
          return 'second';
        }, { store });
        await f().then(
          () => expect.unreachable('the call should have thrown'),
          (err) => expect(err).toBe(value),
        );
        const record = await store.get(f.keyFor());
        expect(record?.status).toBe('failed');
        expect(typeof record?.error?.name).toBe('string');
        expect(typeof record?.error?.message).toBe('string');
        expect(await f()).toBe('second');
        expect(runs).toBe(2);
        await store.close();
      });
    }
  });

  describe(`control-flow signals and aborts on ${storeName}`, () => {
    it('a LangGraph interrupt: rethrown unchanged, `interrupted` event, the re-run goes ahead at once', async () => {
      const store = open();
      const events: string[] = [];
      const signal = Object.assign(new Error('interrupt'), { name: 'GraphInterrupt' });
      let runs = 0;
      const f = idempotent(async function approve() {
        runs++;
        if (runs === 1) throw signal;
        return 'approved';
      }, { store, onEvent: (e) => events.push(e.type) });
      await expect(f()).rejects.toBe(signal);
      expect(events).toContain('interrupted');
      expect(events).not.toContain('failed');
      expect((await store.get(f.keyFor()))?.error?.name).toBe('GraphInterrupt');
      expect(await f()).toBe('approved');
      await store.close();
    });

    it('an abort without reconcile: outcome unknown, the claim stays pending until its lease runs out', async () => {
      const store = open();
      const events: string[] = [];
      const abort = new DOMException('aborted', 'AbortError');
      let runs = 0;
      const f = idempotent(async function send() {
        runs++;
        throw abort;
      }, { store, leaseMs: 60_000, onEvent: (e) => events.push(e.type) });
      await expect(f()).rejects.toBe(abort);
      expect(events).toContain('aborted');
      const record = await store.get(f.keyFor());
      expect(record?.status).toBe('pending');
      await expect(f()).rejects.toBeInstanceOf(DuplicateInFlightError);
      expect(runs).toBe(1);
      await store.close();
    });

    it('an abort with reconcile: the claim is handed back, so the next call takes over at once and asks reconcile', async () => {
      const store = open();
      const abort = new DOMException('aborted', 'AbortError');
      const asked: number[] = [];
      let runs = 0;
      const f = idempotent(async function send() {
        runs++;
        if (runs === 1) throw abort;
        return 'sent';
      }, { store, leaseMs: 60_000, reconcile: async ({ attempts }) => (asked.push(attempts), { happened: false }) });
      await expect(f()).rejects.toBe(abort);
      expect(await f()).toBe('sent');
      expect(asked).toEqual([2]);
      expect(runs).toBe(2);
      await store.close();
    });
  });
}

describe('settles that fail for a moment are retried', () => {
  it('SQLite: another process holds the write lock past busyTimeoutMs when fn returns; the completion is retried and recorded', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path, busyTimeoutMs: 20 });
    await store.ready();
    const locker = spawn('python3', ['-c', [
      'import sqlite3, sys',
      `c = sqlite3.connect(${JSON.stringify(path)}, isolation_level=None)`,
      "c.execute('BEGIN IMMEDIATE')",
      "print('LOCKED', flush=True)",
      'sys.stdin.read()',
      "c.execute('ROLLBACK')",
    ].join('\n')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise((r) => locker.on('exit', r));
    const events: string[] = [];
    let retryingUntil: number | undefined;
    let runs = 0;
    const pay = idempotent(async function pay(order: string) {
      runs++;
      await lineFrom(locker, /LOCKED/); // the lock is taken while fn runs
      return { order, id: 'p_1' };
    }, {
      store,
      leaseMs: 60_000,
      onEvent: (e) => {
        events.push(e.type);
        if (e.type === 'settle-retrying') retryingUntil = e.retryingUntil;
        if (e.type === 'store-error') locker.stdin!.end(); // the lock goes away after the first failed attempt
      },
    });
    const started = Date.now();
    expect(await pay('o-1')).toEqual({ order: 'o-1', id: 'p_1' });
    await exited;
    expect(events).toContain('store-error');
    // What the call waits for, and until when, said once (issue 37, item 4).
    expect(events.filter((t) => t === 'settle-retrying')).toHaveLength(1);
    expect(retryingUntil).toBeGreaterThan(started + 50_000);
    expect(events.at(-1)).toBe('executed');
    expect((await store.get(pay.keyFor('o-1')))?.status).toBe('completed');
    expect(await pay('o-1')).toEqual({ order: 'o-1', id: 'p_1' });
    expect(runs).toBe(1);
    await store.close();
  });

  it('Redis: a complete whose reply times out but which was applied is reported as recorded, not as lost', async () => {
    const server = await RedisServer.start();
    onTestFinished(() => server.kill());
    const store = new RedisStore({ url: server.url, prefix: uniquePrefix(), commandTimeoutMs: 300 });
    const events: string[] = [];
    let runs = 0;
    const pay = idempotent(async function pay(order: string) {
      runs++;
      // The server holds every write for longer than the command timeout: the completion
      // waits behind the pause and is applied when it ends, after its caller stopped
      // waiting. CLIENT PAUSE is in effect once it has answered, so waiting for that
      // answer is the synchronisation (DEBUG SLEEP, used before, began only when the
      // server got round to it, and a completion could slip in first).
      await new Promise<void>((done, fail) => {
        const socket = createConnection({ port: server.port, host: '127.0.0.1' }, () => socket.write('CLIENT PAUSE 1000 WRITE\r\n'));
        socket.on('error', fail);
        socket.on('data', (d) => {
          socket.end();
          if (String(d).startsWith('+OK')) done();
          else fail(new Error(`CLIENT PAUSE answered ${String(d)}`));
        });
      });
      return { order, id: 'p_2' };
    }, { store, leaseMs: 60_000, onEvent: (e) => events.push(e.type) });
    expect(await pay('o-2')).toEqual({ order: 'o-2', id: 'p_2' });
    expect(events).toContain('store-error');
    expect((await store.get(pay.keyFor('o-2')))?.status).toBe('completed');
    expect(await pay('o-2')).toEqual({ order: 'o-2', id: 'p_2' });
    expect(runs).toBe(1);
    await store.close();
  });
});
