// RedisStore against a real Redis Cluster (3 primaries, 3 replicas) started here: the
// conformance suite, processes racing on shared keys, a primary killed mid-run, a slot
// moved mid-run.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, runNode, tempDir, testing } from './helpers';
import { RedisCluster, redisCli } from './redis-cluster';
import { redisCommand, uniquePrefix } from './redis-server';

const { idempotent, RedisStore, StoreError } = lib;
const WORKER = join(ROOT, '__test__', 'fixtures', 'worker.js');

const cluster = await RedisCluster.start();
afterAll(() => cluster.stop());

const prefixes = new WeakMap<object, string>();
function store(extra: Record<string, unknown> = {}) {
  const prefix = uniquePrefix();
  const s = new RedisStore({ url: cluster.url, prefix, cluster: true, ...extra });
  prefixes.set(s, prefix);
  return s;
}
/** The Redis key of `key`'s record in store `s`. */
const redisKey = (s: object, key: string) => `${prefixes.get(s)}${key}`;

testing.storeConformance({ describe, it }, {
  name: 'RedisStore on a Redis Cluster',
  makeStore: () => store(),
  openSecondHandle: (s) => new RedisStore({ url: cluster.url, prefix: prefixes.get(s)!, cluster: true }),
});

describe('RedisStore on a Redis Cluster', () => {
  it('a primary that may evict records (a memory limit, allkeys-lru): the first call\'s check says so', async () => {
    const { EVICTION_CHECK } = require('../dist/stores/redis-store.js') as { EVICTION_CHECK: symbol };
    const port = String(cluster.primaries()[1]);
    redisCli(['-p', port, 'CONFIG', 'SET', 'maxmemory', '64mb', 'maxmemory-policy', 'allkeys-lru']);
    try {
      const s = store();
      expect(await idempotent(async () => 'ok', { store: s, name: 'evicts' })()).toBe('ok');
      expect(await (s as unknown as Record<symbol, Promise<string | null>>)[EVICTION_CHECK]).toMatch(/maxmemory-policy allkeys-lru, maxmemory 67108864 bytes/);
      await s.close();
    } finally {
      redisCli(['-p', port, 'CONFIG', 'SET', 'maxmemory', '0', 'maxmemory-policy', 'noeviction']);
    }
    const calm = store();
    expect(await idempotent(async () => 'ok', { store: calm, name: 'calm' })()).toBe('ok');
    expect(await (calm as unknown as Record<symbol, Promise<string | null>>)[EVICTION_CHECK]).toBeNull();
    await calm.clear();
    await calm.close();
  });

  it('records land on every primary; listRecords, stats and clear walk them all', async () => {
    const s = store();
    const op = idempotent(async function op(n: number) { return n; }, { store: s });
    for (let i = 0; i < 30; i++) await op(i);
    const primaries = cluster.primaries();
    expect(primaries.length).toBe(3);
    // Each primary holds some of the 30 records (keys are spread over the slots).
    const counts = await Promise.all(primaries.map((p) => redisCommand(p, 'DBSIZE')));
    expect(counts.filter((c) => c !== ':0').length).toBe(3);
    expect((await s.listRecords()).length).toBe(30);
    const st = await s.stats!();
    expect(st.completed).toBe(30);
    const cli = await runNode([join(ROOT, 'dist', 'cli.js'), '--redis', cluster.url, '--cluster', '--prefix', prefixes.get(s)!, 'stats', '--json']);
    expect(JSON.parse(cli.stdout).completed).toBe(30);
    expect(await s.clear()).toBe(30);
    expect((await s.listRecords()).length).toBe(0);
    await s.close();
  });

  it('4 processes racing on the same 100 keys: every side effect runs exactly once', async () => {
    const prefix = uniquePrefix();
    const log = join(tempDir(), 'effects.log');
    const children = Array.from({ length: 4 }, () =>
      spawn(process.execPath, [WORKER, 'race', JSON.stringify({ redis: cluster.url, cluster: true, prefix, log, keys: 100, rounds: 2 })], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    const finished = await Promise.all(children.map(collect));
    for (const f of finished) expect(f.stderr).toBe('');
    expect(finished.map((f) => f.code)).toEqual([0, 0, 0, 0]);
    const ran = readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')[0]);
    expect(ran.length).toBe(100);
    expect(new Set(ran).size).toBe(100);
  });

  it('a slot moved mid-run (MOVED/ASK): calls follow it, nothing runs twice, results stay right', async () => {
    const s = store();
    const { op, runs } = countingOp(s);
    const keys = Array.from({ length: 40 }, (_, i) => `move-${i}`);
    for (const k of keys) await op.withKey(k)(k);
    // Move the slot of the first key's record to another primary while calls run.
    const { slot, from, to } = aMove(s, 'move-0');
    const calls = (async () => {
      const out: string[] = [];
      for (let round = 0; round < 5; round++) {
        for (const k of keys) out.push(await op.withKey(k)(k));
      }
      return out;
    })();
    await moveSlot(slot, from, to);
    const results = await calls;
    results.forEach((r, i) => expect(r).toBe(`result of ${keys[i % keys.length]}`));
    expect(cluster.primaryOf(redisKey(s, 'move-0'))).toBe(to);
    expect(await op.withKey('move-0')('move-0')).toBe('result of move-0');
    for (const k of keys) expect(runs.get(k)).toBe(1);
    await s.clear();
    await s.close();
  });

  it('a migration that sets the source before the target (each node redirects to the other for a while): a call waits it out, runs nothing twice, and answers', async () => {
    const s = store();
    const { op, runs } = countingOp(s);
    await op.withKey('loop-0')('loop-0');
    const { slot, from, to } = aMove(s, 'loop-0');
    const [fromId, toId] = [await nodeId(from), await nodeId(to)];
    await cli(['-p', String(to), 'CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId]);
    await cli(['-p', String(from), 'CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId]);
    await migrateKeys(slot, from, to);
    // The source is told first: it now sends the slot's callers to the target (MOVED), and
    // the target, only importing, sends them back (MOVED), until it is told too.
    await cli(['-p', String(from), 'CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
    const movedBefore = (await movedCount(from)) + (await movedCount(to));
    let settled = false;
    const call = op.withKey('loop-0')('loop-0').then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ).finally(() => (settled = true));
    // The redis client follows a MOVED 16 times at once and then gives up: wait until the
    // call has been redirected more often than that (or has already given up).
    while (!settled && (await movedCount(from)) + (await movedCount(to)) - movedBefore <= 40) {
      await new Promise((r) => setImmediate(r));
    }
    for (const port of [to, ...cluster.primaries().filter((p) => p !== to)]) {
      await cli(['-p', String(port), 'CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
    }
    expect(await call).toEqual({ value: 'result of loop-0' });
    expect(runs.get('loop-0')).toBe(1);
    await s.clear();
    await s.close();
  });

  it('a primary killed mid-run: every call returns its own result or a StoreError, nothing runs twice, and once its replica takes over every call works again', async () => {
    const s = store({ connectTimeoutMs: 300, commandTimeoutMs: 700 });
    const ran = new Map<string, number>();
    const op = idempotent(async function op(k: string) {
      ran.set(k, (ran.get(k) ?? 0) + 1);
      return { k };
    }, { store: s });
    const keys = Array.from({ length: 24 }, (_, i) => `fo-${i}`);
    for (const k of keys) expect(await op.withKey(k)(k)).toEqual({ k });
    const victim = cluster.primaryOf(redisKey(s, keys[0]!));
    // Replication is asynchronous: wait until the victim's replica has every record, so
    // that what follows tests the store, not a write lost with the primary.
    await redisCommand(victim, 'WAIT 1 5000');
    const killing = cluster.kill(victim);
    const outcomes = await Promise.all(
      keys.map(async (k) => {
        try {
          expect(await op.withKey(k)(k)).toEqual({ k }); // never another call's result
          return 'ok';
        } catch (error) {
          expect(error).toBeInstanceOf(StoreError);
          return 'store-error';
        }
      }),
    );
    await killing;
    expect(outcomes.length).toBe(keys.length);
    // The replica takes over (the harness lets replicas sync before any test runs; one
    // that never synced would not). The same store, with no restart, then answers every
    // call: the dead primary's keys were replicated, so they replay.
    await cluster.waitUntilOk();
    expect(cluster.primaries()).not.toContain(victim);
    for (const k of keys) expect(await op.withKey(k)(k)).toEqual({ k });
    const fresh = new Set(['after-1', 'after-2', 'after-3']);
    for (const k of fresh) expect(await op.withKey(k)(k)).toEqual({ k });
    // Every key ran exactly once: the calls after the kill replayed or failed, none re-ran.
    for (const k of [...keys, ...fresh]) expect(ran.get(k)).toBe(1);
    await s.close();
  }, 60_000);
});


/** A wrapped `op` of store `s` that counts its runs by key and returns `result of <key>`. */
function countingOp(s: InstanceType<typeof RedisStore>) {
  const runs = new Map<string, number>();
  const op = idempotent(async function op(k: string) {
    runs.set(k, (runs.get(k) ?? 0) + 1);
    return `result of ${k}`;
  }, { store: s });
  return { op, runs };
}

/** A move for the slot of `key`'s record in store `s`: from its primary to another one. */
function aMove(s: object, key: string) {
  const slot = Number(redisCli(['-p', String(cluster.primaries()[0]), 'CLUSTER', 'KEYSLOT', redisKey(s, key)]).trim());
  const from = cluster.primaryOf(redisKey(s, key));
  const to = cluster.primaries().find((p) => p !== from)!;
  return { slot, from, to };
}

/** A cluster node's id (CLUSTER MYID). */
async function nodeId(port: number): Promise<string> {
  return (await cli(['-p', String(port), 'CLUSTER', 'MYID'])).trim();
}

/** Runs redis-cli without blocking the event loop (the calls under test go on meanwhile). */
async function cli(args: string[]): Promise<string> {
  const f = await collect(spawn('redis-cli', args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  if (f.code !== 0 || /^ERR|^\(error\)/m.test(f.stdout)) throw new Error(`redis-cli ${args.join(' ')}: ${f.stdout}${f.stderr}`);
  return f.stdout;
}

/** Moves `slot` from one primary to another the way redis-cli --cluster reshard does, one
 * step per turn of the event loop, so calls meet the slot while it migrates (ASK) and after
 * (MOVED). */
async function moveSlot(slot: number, from: number, to: number): Promise<void> {
  const [fromId, toId] = [await nodeId(from), await nodeId(to)];
  await cli(['-p', String(to), 'CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId]);
  await cli(['-p', String(from), 'CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId]);
  await migrateKeys(slot, from, to);
  // The target first, then the source, then the rest, as redis-cli does (and the
  // CLUSTER SETSLOT docs ask): the source told first would send callers to a target
  // that sends them back (the test above meets that on purpose).
  for (const port of [to, from, ...cluster.primaries().filter((p) => p !== to && p !== from)]) {
    await cli(['-p', String(port), 'CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
  }
}

/** Moves the keys of `slot` from one primary to another, a key at a time. */
async function migrateKeys(slot: number, from: number, to: number): Promise<void> {
  for (;;) {
    const keys = (await cli(['-p', String(from), 'CLUSTER', 'GETKEYSINSLOT', String(slot), '1'])).split('\n').filter(Boolean);
    if (keys.length === 0) break;
    await cli(['-p', String(from), 'MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', ...keys]);
  }
}

/** How many MOVED replies a node has sent (INFO errorstats). */
async function movedCount(port: number): Promise<number> {
  const m = /errorstat_MOVED:count=(\d+)/.exec(await cli(['-p', String(port), 'INFO', 'errorstats']));
  return m === null ? 0 : Number(m[1]);
}
