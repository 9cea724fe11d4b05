// RedisStore against real servers: processes racing, outages, URLs, credentials.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, runNode, tempDir } from './helpers';
import { RedisServer, redisCommand, uniquePrefix } from './redis-server';

const { idempotent, RedisStore, StoreError } = lib;
const WORKER = join(ROOT, '__test__', 'fixtures', 'worker.js');
const servers: RedisServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.kill();
});

async function server(args: string[] = []) {
  const s = await RedisServer.start(args);
  servers.push(s);
  return s;
}

describe('RedisStore', () => {
  it('4 processes racing on the same 200 keys: every side effect runs exactly once', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const log = join(tempDir(), 'effects.log');
    const children = Array.from({ length: 4 }, () =>
      spawn(process.execPath, [WORKER, 'race', JSON.stringify({ redis: s.url, prefix, log, keys: 200, rounds: 3 })], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    const finished = await Promise.all(children.map(collect));
    for (const f of finished) expect(f.stderr).toBe('');
    expect(finished.map((f) => f.code)).toEqual([0, 0, 0, 0]);
    const ran = readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')[0]);
    expect(ran.length).toBe(200);
    expect(new Set(ran).size).toBe(200);
  });

  it('an unreachable server is a StoreError within the connect timeout, and fn does not run', async () => {
    const s = await server();
    await s.kill(); // a port nobody listens on
    const store = new RedisStore({ url: s.url, connectTimeoutMs: 300, commandTimeoutMs: 300 });
    let runs = 0;
    const op = idempotent(async function op() { runs++; }, { store });
    const started = Date.now();
    const err = await op().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toContain(`127.0.0.1:${s.port}`);
    expect(Date.now() - started).toBeLessThan(10_000); // bounded, not hung (a hang would time the test out)
    expect(runs).toBe(0);
    await store.close();
  });

  it.each(['loop', 'tokio'] as const)('an unreachable server says so, as the CLI does: connection refused, is the server running? (%s transport; issue 37, item 4)', async (transport) => {
    const s = await server();
    await s.kill();
    if (transport === 'tokio') process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT = 'tokio';
    const store = new RedisStore({ url: s.url, connectTimeoutMs: 300, commandTimeoutMs: 300 });
    delete process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT;
    const op = idempotent(async function op() {}, { store });
    const err = (await op().then(() => undefined, (e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(StoreError);
    expect(err.message).toMatch(/connection refused, is the server running\?/);
    expect(err.message).not.toMatch(/libuv error/);
    await store.close();
  });

  it('the server killed with calls in flight: StoreError, nothing runs unrecorded, and it works again after a restart', async () => {
    const s = await server();
    const store = new RedisStore({ url: s.url, prefix: uniquePrefix(), connectTimeoutMs: 500, commandTimeoutMs: 1000 });
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow = idempotent(async function slow(n: number) {
      runs++;
      if (n === 1) await gate;
      return n;
    }, { store });

    expect(await slow(0)).toBe(0); // connected and working
    const inFlight = slow(1); // acquired: its record exists, fn is waiting
    while (runs < 2) await new Promise((r) => setImmediate(r));
    await s.kill();

    release();
    const lost = await inFlight.then(() => undefined, (e: unknown) => e);
    expect(lost).toBeInstanceOf(StoreError);
    // The server died with the complete unconfirmed and the record unreadable: unknown, never "lost".
    expect((lost as InstanceType<typeof StoreError>).outcome).toBe('unknown');
    expect((lost as Error).message).toMatch(/whether its result was recorded is unknown/);

    const refused = await slow(2).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(StoreError);
    expect(runs).toBe(2); // slow(2) never ran: it had no record

    await s.restart();
    let back: unknown;
    for (let i = 0; i < 50; i++) {
      back = await slow(3).then((v) => v, (e: unknown) => e);
      if (!(back instanceof StoreError)) break;
    }
    expect(back).toBe(3);
    expect(await slow(3)).toBe(3);
    expect(runs).toBe(3);
    await store.close();
  });

  it('a password in the URL never appears in errors or in the store path', async () => {
    const s = await server(['--requirepass', 'hunter2-secret']);
    const wrong = new RedisStore({ url: `redis://:wrong-secret@127.0.0.1:${s.port}`, connectTimeoutMs: 500 });
    const err = await wrong.get('k').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect(String((err as Error).message)).not.toContain('wrong-secret');
    expect(wrong.path).not.toContain('wrong-secret');
    await wrong.close();

    const right = new RedisStore({ url: `redis://:hunter2-secret@127.0.0.1:${s.port}/3`, prefix: uniquePrefix() });
    expect(right.path).not.toContain('hunter2');
    const op = idempotent(async function op() { return 'ok'; }, { store: right });
    expect(await op()).toBe('ok');
    expect(await op()).toBe('ok');
    await right.close();
  });

  // The list docs/stores.md gives for a least-privilege user, and the ones it gave before
  // the eviction check read INFO and before listings read with MGET (a user made from
  // either must keep working after an upgrade; without +info there is just no warning).
  it.each([
    ['the list documented now', '+set +get +mget +pexpiretime +evalsha +script|load +time +type +hgetall +hmget +scan +unlink +setrange +append +rename +pexpireat +persist +info'],
    ['the list documented before INFO', '+set +get +mget +pexpiretime +evalsha +script|load +time +type +hgetall +hmget +scan +unlink +setrange +append +rename +pexpireat +persist'],
    ['the list documented before MGET', '+set +get +pexpiretime +evalsha +script|load +time +type +hgetall +hmget +scan +unlink +setrange +append +rename +pexpireat +persist'],
  ])('an ACL user limited to the commands it needs can run every operation: %s', async (_, commands) => {
    const s = await server();
    const set = await redisCommand(s.port, `ACL SETUSER tool on >tool-pass ~idem:* ${commands}`);
    expect(set).toBe('+OK');
    const store = new RedisStore({ url: `redis://tool:tool-pass@127.0.0.1:${s.port}`, prefix: 'idem:' });
    let runs = 0;
    const op = idempotent(async function op(n: number) { runs++; return n; }, { store });
    expect(await op(1)).toBe(1);
    expect(await op(1)).toBe(1);
    // A large result is staged under a key of its own and renamed into place.
    const big = idempotent(async function big() { runs++; return 'x'.repeat(10_000); }, { store, ttlMs: 60_000 });
    expect(await big()).toHaveLength(10_000);
    expect(await big()).toHaveLength(10_000);
    expect((await store.listRecords()).length).toBe(2);
    expect((await store.listRecent!({ limit: 1 })).matched).toBe(2);
    expect(await store.stats()).toMatchObject({ completed: 2, pending: 0, failed: 0 });
    expect((await store.get(op.keyFor(1)))?.status).toBe('completed');
    expect(await store.clear()).toBe(2);
    expect(runs).toBe(2);
    await store.close();
  });

  it('a database number in the URL keeps records apart', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const db1 = new RedisStore({ url: `${s.url}/1`, prefix });
    const db2 = new RedisStore({ url: `${s.url}/2`, prefix });
    let runs = 0;
    const on = (store: InstanceType<typeof RedisStore>) => idempotent(async function op() { return ++runs; }, { store });
    expect(await on(db1)()).toBe(1);
    expect(await on(db2)()).toBe(2);
    expect(await on(db1)()).toBe(1);
    await db1.close();
    await db2.close();
  });

  it('the CLI takes --redis for every command', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const store = new RedisStore({ url: s.url, prefix });
    await idempotent(async function op() { return 'x'; }, { store }).withKey('k1')();
    await store.close();
    const cli = (...args: string[]) => runNode([join(ROOT, 'dist', 'cli.js'), '--redis', s.url, '--prefix', prefix, ...args]);
    expect((await cli('inspect')).stdout).toContain('k1');
    expect(JSON.parse((await cli('inspect', '--key', 'k1', '--json')).stdout).result).toBe('x');
    expect((await cli('inspect', '--key', 'nope')).code).toBe(1);
    expect(JSON.parse((await cli('stats', '--json')).stdout).completed).toBe(1);
    expect(JSON.parse((await cli('clear', '--yes', '--json')).stdout)).toEqual({ deleted: 1 });
    expect(existsSync(join(ROOT, 'dump.rdb'))).toBe(false);
  });

  it('clear deletes only this store\'s records, and the CLI counts what it deletes', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const outer = new RedisStore({ url: s.url, prefix });
    const nested = new RedisStore({ url: s.url, prefix: `${prefix}sub:` });
    for (const [store, key] of [[outer, 'a'], [nested, 'a'], [nested, 'b']] as const) {
      await idempotent(async function op() { return key; }, { store }).withKey(key)();
    }
    expect(await redisCommand(s.port, `SET ${prefix}other-app x`)).toBe('+OK');
    expect(await redisCommand(s.port, `HSET ${prefix}user:1 name bob status completed`)).toBe(':2');
    const cli = (...args: string[]) => runNode([join(ROOT, 'dist', 'cli.js'), '--redis', s.url, '--prefix', prefix, ...args]);
    const stats = JSON.parse((await cli('stats', '--json')).stdout);
    expect(stats.pending + stats.completed + stats.failed + stats.expired).toBe(1);
    expect(JSON.parse((await cli('clear', '--yes', '--json')).stdout)).toEqual({ deleted: 1 });
    expect((await nested.listRecords()).map((r) => r.key).sort()).toEqual(['a', 'b']);
    expect(await redisCommand(s.port, `EXISTS ${prefix}other-app ${prefix}user:1`)).toBe(':2');
    expect(await nested.clear()).toBe(2);
    await outer.close();
    await nested.close();
  });
});
