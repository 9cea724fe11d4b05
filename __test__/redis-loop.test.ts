// RedisStore's transport on the JavaScript thread's own event loop (src/redis_store/on_loop/):
// a plain redis:// server under Node. What the Tokio transport's outage tests check
// (src/redis_store/tests.rs) holds here too, and what only this transport must do: run no
// other thread, keep Node running while (and only while) a call is in flight, close with
// a worker thread.

import { readFileSync, readdirSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, runNode } from './helpers';
import { RedisServer, commandCalls, redisCommand, uniquePrefix, untilOneCommandSettle } from './redis-server';

const { idempotent, RedisStore, StoreError } = lib;
const servers: RedisServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.kill();
});

async function server(args: string[] = []) {
  const s = await RedisServer.start(args);
  servers.push(s);
  return s;
}

/** The server's clock (TIME), in ms. */
async function serverTime(port: number): Promise<number> {
  const [seconds, micros] = (await redisCommand(port, 'TIME')).split('\r\n').filter((l) => /^\d+$/.test(l)).map(Number);
  return seconds * 1000 + micros / 1000;
}

/** Times the Tokio worker thread (`idempotent-io`) of this process was switched in so far. */
function tokioSwitches(): number {
  let n = 0;
  for (const tid of readdirSync('/proc/self/task')) {
    const status = readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
    if (!/^Name:\s+idempotent-io$/m.test(status)) continue;
    n += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)![1]);
    n += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)![1]);
  }
  return n;
}

describe('RedisStore on the JavaScript thread\'s event loop', () => {
  it.runIf(process.platform === 'linux')('runs a call\'s acquire, renew, complete and fail without waking the Tokio worker', async () => {
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix() });
    const pay = idempotent(async function pay(n: number) {
      if (n % 7 === 0) throw new Error(`declined ${n}`);
      // A lease of 300 ms renews while this sleeps. (Not shorter: on a busy machine a
      // claim of 300 calls answered after 80% of a 30 ms lease is handed back unused, by
      // design, and the call then says so instead of running.)
      if (n % 50 === 1) await new Promise((r) => setTimeout(r, 400));
      return { n };
    }, { store, leaseMs: 300 });
    await pay(100); // connected
    const before = tokioSwitches();
    const calls = Array.from({ length: 300 }, (_, i) => pay(i % 150).then((v) => v, (e: Error) => e.message));
    const results = await Promise.all(calls);
    expect(tokioSwitches()).toBe(before);
    expect(results[14]).toBe('declined 14');
    expect(results[2]).toEqual({ n: 2 });
    await store.close();
  });

  it('one turn\'s calls cross as one string: keys, names, metas and results of any characters arrive exactly, and a bad key fails only its own call', async () => {
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix() });
    const keys = ['a;b,c:d', 'é', '😀 two units', '1:2:3', ';', ',', '-1', 'x'.repeat(1900), 'k\u0000nul', '日本語のキー'];
    let runs = 0;
    const names = ['n;1', 'ñame', '😀'];
    const wrapped = names.map((name) =>
      idempotent(async (k: string) => { runs++; return { k, text: `résumé 😀 ${k.slice(0, 8)}`, n: [1, ';', ','] }; }, { name, store, meta: () => ({ scope: `thread ✓ ${name}` }) }),
    );
    // Every call of the first round is made in one turn: one crossing.
    const first = await Promise.all(
      keys.flatMap((k) => wrapped.map((f) => f.withKey(`${f.name}/${k}`)(k).then((v) => v, (e: Error) => e))),
    );
    for (const v of first) expect(v).not.toBeInstanceOf(Error);
    expect(runs).toBe(keys.length * names.length);
    // A lone surrogate in one key fails that call alone (a TypeError naming the key); the
    // others of the same turn go through.
    const mixed = await Promise.all([
      wrapped[0].withKey('bad \uD800')('x').then((v) => v, (e: Error) => e),
      ...keys.map((k) => wrapped[1].withKey(`${wrapped[1].name}/${k}`)(k)),
    ]);
    expect(mixed[0]).toBeInstanceOf(TypeError);
    expect((mixed[0] as Error).message).toMatch(/the key/);
    expect(mixed.slice(1)).toEqual(keys.map((k) => ({ k, text: `résumé 😀 ${k.slice(0, 8)}`, n: [1, ';', ','] })));
    expect(runs).toBe(keys.length * names.length);
    const listed = await store.listRecords();
    expect(listed.map((r) => r.key).sort()).toEqual(keys.flatMap((k) => names.map((n) => `${n}/${k}`)).sort());
    for (const r of listed) {
      expect(r.status).toBe('completed');
      expect(r.meta).toEqual({ scope: `thread ✓ ${r.name}` });
    }
    await store.close();
  });

  it('large results (staged under a key of their own and renamed into place) are kept exactly, with their ttl from the settle', async () => {
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix() });
    let runs = 0;
    const sizes = [3000, 3100, 5000, 70_000, 1_000_000];
    const tool = idempotent(async (n: number) => {
      runs++;
      return { n, text: 'é😀;,:'.repeat(Math.ceil(n / 7)).slice(0, n) };
    }, { name: 'tool', store, ttlMs: 60_000 });
    const first = await Promise.all(sizes.map((n) => tool(n)));
    const again = await Promise.all(sizes.map((n) => tool(n)));
    expect(again).toEqual(first);
    expect(runs).toBe(sizes.length);
    for (const n of sizes) {
      const r = (await store.get(tool.keyFor(n)))!;
      expect(r.result).toEqual(first[sizes.indexOf(n)]);
      expect(r.expiresAt! - r.updatedAt).toBe(60_000);
    }
    // Nothing but the records is left under the prefix (no staging key outlives its settle).
    expect((await store.listRecords()).length).toBe(sizes.length);
    const failing = idempotent(async () => { throw new Error('x'.repeat(10_000)); }, { name: 'failing', store });
    await expect(failing()).rejects.toThrow(/xxxx/);
    expect((await store.get(failing.keyFor()))!.error!.message).toBe('x'.repeat(10_000));
    // A fresh claim settles in one command whatever its size (one_command.rs); a renewed
    // one changed its record, so its settle is the script, and a large outcome is staged
    // (RENAME into place). The tool outlasts its lease: it is renewed before it settles.
    const renames = async () => (await commandCalls(s.port))('rename');
    const before = await renames();
    const slow = idempotent(async (n: number) => {
      await new Promise((r) => setTimeout(r, 700));
      return { n, text: 'ü'.repeat(n) };
    }, { name: 'slow', store, ttlMs: 60_000, leaseMs: 300 });
    const renewed = await Promise.all([5000, 70_000].map((n) => slow(n)));
    expect(await renames()).toBe(before + 2);
    for (const [i, n] of [5000, 70_000].entries()) {
      const r = (await store.get(slow.keyFor(n)))!;
      expect(r.result).toEqual(renewed[i]);
      expect(r.expiresAt! - r.updatedAt).toBe(60_000);
    }
    expect((await store.listRecords()).length).toBe(sizes.length + 3);
    await store.close();
  });

  it('settles a new call with one plain SET IFEQ where the server has it (Valkey 8.1+, Redis 8.4+), else with the script; the record is the same either way', async () => {
    const s = await server();
    const ifeq = !/syntax/i.test(await redisCommand(s.port, 'SET idt-probe x IFEQ y'));
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix() });
    const pay = idempotent(async function pay(n: number) {
      await new Promise((r) => setImmediate(r));
      if (n % 5 === 0) throw new Error(`declined ${n}`);
      return { n, note: 'ünï ☃' };
    }, { store, ttlMs: 60_000 });
    const calls = async () => {
      const count = await commandCalls(s.port);
      return { evalsha: count('evalsha'), time: count('time'), pexpiretime: count('pexpiretime') };
    };
    // Warm up until a new call settles without the settle script: the store then has the
    // server's clock, has tried IFEQ and, where it is missing, has loaded the small script.
    // Two warm-up calls were not always enough: on a busy CI host the first clock read was
    // slow, the small script's first use fell inside the counted calls, and its NOSCRIPT
    // made 21.
    const serverStart = await serverTime(s.port);
    const warm = await untilOneCommandSettle(s.port, (i) => pay(1000 + i).catch(() => {}));
    await pay(101);
    const before = await calls();
    for (let n = 2; n <= 21; n++) await pay(n).catch(() => {});
    const after = await calls();
    // Where IFEQ is missing, the smallest compare-and-set script: it reads no clock (the
    // settle script reads TIME and PEXPIRETIME for every new call).
    expect(after.evalsha - before.evalsha).toBe(ifeq ? 0 : 20);
    expect(after.pexpiretime - before.pexpiretime).toBe(0);
    expect(after.time - before.time).toBeLessThanOrEqual(1);
    const serverEnd = await serverTime(s.port);
    const records = await store.listRecords({ limit: 500 });
    expect(records).toHaveLength(21 + warm);
    for (const r of records) {
      const n = (r.result as { n: number } | undefined)?.n;
      if (r.status === 'completed') expect(r.result).toEqual({ n, note: 'ünï ☃' });
      else expect([r.status, r.error?.message]).toEqual(['failed', expect.stringMatching(/^declined \d+$/)]);
      expect(r.attempts).toBe(1);
      expect(r.leaseExpiresAt).toBeNull();
      expect(r.createdAt).toBeLessThanOrEqual(r.updatedAt);
      expect(r.expiresAt).toBe(r.updatedAt + 60_000);
      // On the server's clock, as the script writes them (the one command estimates it):
      // between its readings before and after the calls (however long a loaded host took).
      expect(r.updatedAt).toBeGreaterThanOrEqual(serverStart - 1_000);
      expect(r.updatedAt).toBeLessThanOrEqual(serverEnd + 1_000);
      expect(r.durationMs).toBeGreaterThanOrEqual(0);
    }
    // Calls settled in one turn of the event loop: where IFEQ is missing, one script call
    // settles them all (issue 39); each is its own record, as if alone.
    const turn = await calls();
    // (Sixteen that complete: a call that throws settles a turn later.)
    const ns = Array.from({ length: 20 }, (_, i) => 301 + i).filter((n) => n % 5 !== 0);
    const together = await Promise.all(ns.map((n) => pay(n)));
    const afterTurn = await calls();
    expect(afterTurn.evalsha - turn.evalsha).toBe(ifeq ? 0 : 1);
    expect(afterTurn.pexpiretime - turn.pexpiretime).toBe(0);
    for (const [i, n] of ns.entries()) {
      expect(together[i]).toEqual({ n, note: 'ünï ☃' });
      const r = await store.get(pay.keyFor(n));
      expect([r?.status, r?.attempts, r?.leaseExpiresAt, r?.result]).toEqual(['completed', 1, null, { n, note: 'ünï ☃' }]);
    }
    // A replay returns what was stored.
    expect(await pay(2)).toEqual({ n: 2, note: 'ünï ☃' });
    await expect(pay(5)).rejects.toThrow('declined 5');
    await store.close();
  });

  it('settles sharing one compare-and-set: a record that moved on meanwhile is decided alone (fenced), the others of its turn land', async () => {
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix() });
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let started = 0;
    let allStarted!: () => void;
    const running = new Promise<void>((r) => (allStarted = r));
    let warming = true;
    const pay = idempotent(async function pay(n: number) {
      if (!warming && ++started === 4) allStarted();
      if (!warming) await gate;
      return { n };
    }, { store, ttlMs: 60_000, leaseMs: 60_000 });
    // EVALSHA that ran a script: a NOSCRIPT (the settle script's first use, where IFEQ
    // settled every call before) is answered, then sent again.
    const stats = async () => {
      const count = await commandCalls(s.port);
      return { evalsha: count('evalsha') - count('evalsha', 'failed_calls'), pexpiretime: count('pexpiretime') };
    };
    await untilOneCommandSettle(s.port, (i) => pay(1000 + i));
    warming = false;
    const calls = [1, 2, 3, 4].map((n) => pay(n).then((value) => ({ value }), (error: unknown) => ({ error })));
    await running;
    // An operator frees call 3's record while its fn runs: its claim is no longer what SET NX wrote.
    expect(await store.release(pay.keyFor(3))).toBe(true);
    const before = await stats();
    open();
    const results = await Promise.all(calls);
    const after = await stats();
    for (const n of [1, 2, 4]) {
      expect(results[n - 1]).toEqual({ value: { n } });
      expect(await store.get(pay.keyFor(n))).toMatchObject({ status: 'completed', result: { n }, attempts: 1 });
    }
    expect(results[2]).toMatchObject({ error: { code: 'LEASE_LOST' } });
    expect((await store.get(pay.keyFor(3)))?.status).toBe('pending'); // released, not settled by the fenced run
    // One call for the turn's compare-and-set (Redis 7; none where SET IFEQ settles each),
    // then the settle script for call 3 alone.
    const ifeq = !/syntax/i.test(await redisCommand(s.port, 'SET idt-probe x IFEQ y'));
    expect(after.evalsha - before.evalsha).toBe(ifeq ? 1 : 2);
    await store.close();
  });

  it('a server that accepts but never answers: a StoreError within the timeouts, each time', async () => {
    const silent: Server = createServer(() => {}); // the kernel completes the handshake; nothing replies
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as { port: number };
    const store = new RedisStore({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 300, commandTimeoutMs: 300 });
    let runs = 0;
    const op = idempotent(async function op() { runs++; }, { store });
    for (let i = 0; i < 2; i++) {
      const started = Date.now();
      const err = await op().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(StoreError);
      expect((err as Error).message).toMatch(/no answer within/);
      expect(Date.now() - started).toBeLessThan(10_000); // bounded, not hung
    }
    expect(runs).toBe(0);
    await store.close();
    silent.close();
  });

  it('a paused server: calls fail within the command timeout; once it runs again, so do they', async () => {
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix(), commandTimeoutMs: 300 });
    let runs = 0;
    const op = idempotent(async function op(n: number) { runs++; return n; }, { store });
    expect(await op(1)).toBe(1);
    s.pause();
    const err = await op(2).then(() => undefined, (e: unknown) => e);
    s.resume();
    expect(err).toBeInstanceOf(StoreError);
    expect(runs).toBe(1);
    let back: unknown;
    for (let i = 0; i < 50; i++) {
      back = await op(3).then((v) => v, (e: unknown) => e);
      if (!(back instanceof StoreError)) break;
    }
    expect(back).toBe(3);
    expect(await op(1)).toBe(1);
    await store.close();
  });

  it('a restart while the store is idle: the very next call works (the dropped connection is replaced, the call sent again)', async () => {
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix(), connectTimeoutMs: 2000 });
    const op = idempotent(async function op(n: number) { return n; }, { store });
    expect(await op(1)).toBe(1);
    await s.restart(); // the server forgets everything (no persistence)
    expect(await op(2)).toBe(2);
    expect(await op(1)).toBe(1); // a new record: the restart lost the old one
    await store.close();
  });

  it('resolves a host name (through libuv\'s DNS)', async () => {
    const s = await server();
    const store = new RedisStore({ url: `redis://localhost:${s.port}/3`, prefix: uniquePrefix() });
    const op = idempotent(async function op() { return 'ok'; }, { store });
    expect(await op()).toBe('ok');
    expect(await op()).toBe('ok');
    await store.close();
  });

  it('after close(), a call is a StoreError that says the store is closed', async () => {
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix() });
    const op = idempotent(async function op() { return 1; }, { store });
    expect(await op()).toBe(1);
    await store.close();
    const err = await op().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toMatch(/closed/);
  });

  it('an idle store does not keep Node running; a call in flight does, until it is answered', async () => {
    const s = await server();
    const script = (body: string) =>
      `const { RedisStore, idempotent } = require(${JSON.stringify(ROOT)});
       const store = new RedisStore({ url: ${JSON.stringify(s.url)}, prefix: ${JSON.stringify(uniquePrefix())}, commandTimeoutMs: 500 });
       const op = idempotent(async function op() { return 'done'; }, { store });
       ${body}`;
    // Never closed: the process ends by itself once its last call is answered.
    const idle = await runNode(['-e', script('op().then((v) => console.log(v));')]);
    expect(idle.code).toBe(0);
    expect(idle.stdout.trim()).toBe('done');
    // The server paused: nothing but the pending call keeps the process alive, and it
    // does until the call fails with the command timeout.
    s.pause();
    try {
      const pending = await runNode(['-e', script('op().then(() => console.log("answered"), (e) => console.log(e.name));')]);
      expect(pending.code).toBe(0);
      expect(pending.stdout.trim()).toBe('StoreError');
    } finally {
      s.resume();
    }
  });

  it('a worker thread that uses a store and ends (without closing it): no crash, the main thread carries on', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const code = `
      const { Worker } = require('node:worker_threads');
      const body = ${JSON.stringify(`
        const { RedisStore, idempotent } = require(${JSON.stringify(ROOT)});
        const store = new RedisStore({ url: ${JSON.stringify(s.url)}, prefix: ${JSON.stringify(prefix)} });
        const op = idempotent(async function op(n) { return n * 2; }, { store });
        Promise.all([op(1), op(2), op(3)]).then((v) => require('node:worker_threads').parentPort.postMessage(v));
      `)};
      const run = () => new Promise((done, fail) => {
        const w = new Worker(body, { eval: true });
        let got;
        w.on('message', (m) => { got = m; });
        w.on('error', fail);
        w.on('exit', (code) => done({ code, got }));
      });
      (async () => {
        for (let i = 0; i < 3; i++) console.log(JSON.stringify(await run()));
      })();`;
    const out = await runNode(['-e', code]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const lines = out.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toEqual(Array.from({ length: 3 }, () => ({ code: 0, got: [2, 4, 6] })));
  });

  it('a worker thread that dies with calls in flight (its server paused): no crash, the process carries on', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const code = `
      const { Worker } = require('node:worker_threads');
      const body = ${JSON.stringify(`
        const { RedisStore, idempotent } = require(${JSON.stringify(ROOT)});
        const store = new RedisStore({ url: ${JSON.stringify(s.url)}, prefix: ${JSON.stringify(prefix)} });
        const op = idempotent(async function op(n) { return n; }, { store });
        op(1); op(2);
        // Its Node environment goes away with both requests unanswered.
        setTimeout(() => { throw new Error('the worker dies'); }, 100);
      `)};
      const w = new Worker(body, { eval: true });
      w.on('error', (e) => console.log('worker error: ' + e.message));
      w.on('exit', (code) => console.log('worker exit ' + code));`;
    s.pause();
    let out;
    try {
      out = await runNode(['-e', code]);
    } finally {
      s.resume();
    }
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(out.stdout.trim().split('\n')).toEqual(['worker error: the worker dies', 'worker exit 1']);
  });

  it('the Tokio transport still serves a rediss:// or cluster store, and every store\'s listings', async () => {
    // (Those are covered by redis.test.ts, redis-cluster.test.ts and src/redis_store/tests.rs;
    // here: a loop store's listings, clear and get, which go through the Tokio transport.)
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix() });
    const op = idempotent(async function op(n: number) { return n; }, { store });
    for (let i = 0; i < 5; i++) await op(i);
    expect((await store.listRecords()).length).toBe(5);
    expect((await store.get(op.keyFor(3)))?.result).toBe(3);
    expect(await store.clear()).toBe(5);
    await store.close();
  });
});
