// Real processes against one PostgreSQL table: races, kills at every protocol step, and
// a 'block' waiter in another process woken by NOTIFY.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, tempDir, testHooks } from './helpers';
import { PG_URL, dropTables, sql, uniqueTable } from './postgres-server';

const WORKER = join(ROOT, '__test__', 'fixtures', 'pg-worker.js');
const LEASE_MS = 3000;

afterAll(() => dropTables());

function worker(mode: string, opts: Record<string, unknown>, env: Record<string, string> = {}) {
  return spawn(process.execPath, [WORKER, mode, JSON.stringify(opts)], {
    cwd: ROOT,
    env: { ...process.env, ...(Object.keys(env).length > 0 ? testHooks(env) : {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Resolves once the child's whole stdout so far satisfies `ready`. */
function output(child: ReturnType<typeof worker>, ready: (out: string) => boolean): Promise<string> {
  return new Promise((done, fail) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d;
      if (ready(out)) {
        child.stdout!.off('data', onData);
        done(out);
      }
    };
    child.stdout!.on('data', onData);
    child.on('close', (code) => fail(new Error(`child exited (${code}); stdout: ${out}`)));
  });
}

function logLines(log: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
}

async function clockPast(epochMs: number) {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, epochMs - Date.now() + 1));
}

describe('many processes, one PostgreSQL table', () => {
  it('4 processes racing on the same 100 keys (300 calls in flight each): every side effect runs exactly once', async () => {
    const table = uniqueTable();
    const log = join(tempDir(), 'effects.log');
    const children = Array.from({ length: 4 }, () => worker('race', { url: PG_URL, table, log, keys: 100, rounds: 3 }));
    const finished = await Promise.all(children.map(collect));
    for (const f of finished) expect(f.stderr).toBe('');
    expect(finished.map((f) => f.code)).toEqual([0, 0, 0, 0]);

    const ran = logLines(log).map((l) => l.split(' ')[0]);
    expect(ran.length).toBe(100);
    expect(new Set(ran).size).toBe(100);
    // Every process got the one stored result: the same executing pid per key.
    const byKey = new Map(logLines(log).map((l) => l.split(' ') as [string, string]));
    for (const f of finished) {
      for (const [key, by] of Object.entries(JSON.parse(f.stdout.split('RESULTS ')[1]))) expect(String(by)).toBe(byKey.get(key));
    }
  });

  it("a 'block' waiter in another process, polling every 5 s, is woken by the owner's NOTIFY", async () => {
    const table = uniqueTable();
    const log = join(tempDir(), 'effects.log');
    const key = 'order-9';
    const store = new lib.PostgresStore({ url: PG_URL, table });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    // The owner (this process) holds the key until the gate opens.
    const tool = lib.idempotent(async function tool(k: string) {
      await gate;
      return { key: k, by: 'owner' };
    }, { store });
    const owner = tool.withKey(key)(key);
    const child = worker('waiter', { url: PG_URL, table, log, key });
    const done = collect(child);
    // It found the key in flight; once it LISTENs, it marks the claim as awaited.
    await output(child, (out) => /^WAITING$/m.test(out));
    while (!(await sql(`SELECT watched FROM "${table}" WHERE key = $1`, [key])).rows[0]?.watched) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const record = await store.get(key);
    const settledAt = Date.now();
    open();
    expect(await owner).toEqual({ key, by: 'owner' });
    const f = await done;
    const wokenAt = Date.now();
    expect(f.stderr).toBe('');
    const lines = f.stdout.split('\n').filter(Boolean);
    // WAITING, then WOKEN by the owner's NOTIFY (the only wake-up: no poll was due), then DONE.
    expect(lines.map((l) => l.split(' ')[0])).toEqual(['WAITING', 'WOKEN', 'DONE']);
    expect(JSON.parse(lines[2].slice('DONE '.length))).toEqual({ key, by: 'owner' });
    expect(record?.status).toBe('pending');
    expect(logLines(log)).toEqual([]); // the waiter never ran the tool
    // Woken by the notification, not by its next poll 5 s later.
    expect(wokenAt - settledAt).toBeLessThan(4000);
    await store.close();
  });
});

describe('NOTIFY carries no record key (issue 29, item 5)', () => {
  // Any role that can connect may LISTEN on the table's channel, with no privilege on the
  // table. Before this change the payload was the raw key (a derived key, or a business
  // key such as an order id); now it is the awaited claim's tag (SHA-256 of its token).
  it("a plain LISTEN during calls sees no key, and 40 'block' waiters in another process (no poll due) are each woken once, by their own claim's NOTIFY", async () => {
    const table = uniqueTable();
    const log = join(tempDir(), 'effects.log');
    const keys = Array.from({ length: 40 }, (_, i) => `order-${1000 + i}-card-4242`);
    const { postgresSql } = require(join(ROOT, 'dist', 'core', 'native.js')) as typeof import('../dist/core/native.js');
    const { Client } = require('pg') as typeof import('pg');
    const listener = new Client({ connectionString: PG_URL });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query(`LISTEN ${postgresSql(table).channel}`);

    const store = new lib.PostgresStore({ url: PG_URL, table });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const tool = lib.idempotent(async function tool(k: string) {
      await gate;
      return { key: k, by: 'owner' };
    }, { store });
    const owners = keys.map((k) => tool.withKey(k)(k));
    const child = worker('waiters', { url: PG_URL, table, log, keys });
    const done = collect(child);
    await output(child, (out) => keys.every((k) => out.includes(`WAITING ${k}\n`)));
    // Every claim marked as awaited (the waiters LISTEN on their own connection).
    while (Number((await sql(`SELECT count(*) AS n FROM "${table}" WHERE watched`)).rows[0].n) < keys.length) {
      await new Promise((r) => setTimeout(r, 10));
    }
    open();
    await Promise.all(owners);
    const f = await done;
    expect(f.stderr).toBe('');
    const { woken, results } = JSON.parse(f.stdout.split('ALL ')[1]) as { woken: Record<string, number>; results: Array<{ key: string; by: string }> };
    expect(results).toEqual(keys.map((key) => ({ key, by: 'owner' })));
    expect(logLines(log)).toEqual([]); // no waiter ran the tool
    // Each waiter was woken by its own claim's NOTIFY (polls were minutes away), and only
    // by its own: a notification does not make every waiter look again.
    expect(Object.keys(woken).sort()).toEqual([...keys].sort());
    for (const k of keys) expect(woken[k]).toBe(1);
    // What a stranger on the channel heard: one tag per settled claim, no key.
    while (heard.length < keys.length) await new Promise((r) => setTimeout(r, 10));
    await listener.end();
    expect(heard).toHaveLength(keys.length);
    for (const payload of heard) {
      expect(payload).toMatch(/^[0-9a-f]{64}$/);
      for (const k of keys) {
        expect(payload).not.toContain(k);
        expect(payload).not.toContain(tool.keyFor(k));
      }
    }
    await store.close();
  });
});

describe.concurrent('crash at every step: PostgresStore', () => {
  // [where it dies, how, effects after the crash, the record it leaves, total effects in the end]
  const points: Array<[string, Record<string, unknown>, Record<string, string>, number, string, number]> = [
    ['after acquire, before fn', {}, { IDEMPOTENT_TOOLS_FAULT: 'after-acquire' }, 0, 'pending', 1],
    ['inside fn, before the side effect', { dieInFn: true }, {}, 0, 'pending', 1],
    ['after the side effect, before complete (the one window)', {}, { IDEMPOTENT_TOOLS_FAULT: 'after-fn' }, 1, 'pending', 2],
    ['after complete, before the promise resolves', {}, { IDEMPOTENT_TOOLS_FAULT: 'after-complete' }, 1, 'completed', 1],
  ];
  for (const [point, extra, env, effectsAfterCrash, leftStatus, totalEffects] of points) {
    it(point, async () => {
      const table = uniqueTable();
      const log = join(tempDir(), 'effects.log');
      const key = 'charge-1';
      const died = await collect(worker('once', { url: PG_URL, table, log, key, leaseMs: LEASE_MS, ...extra }, env));
      expect(died.signal, died.stderr).toBe('SIGKILL');
      expect(died.stdout).not.toMatch(/DONE/);
      expect(logLines(log).length).toBe(effectsAfterCrash);

      const store = new lib.PostgresStore({ url: PG_URL, table });
      const tool = lib.idempotent(async function tool(k: string) {
        require('node:fs').appendFileSync(log, `${k} parent\n`);
        return { key: k, by: 'parent' };
      }, { store, leaseMs: LEASE_MS });
      const call = () => tool.withKey(key)(key);
      const record = await store.get(key);
      expect(record?.status).toBe(leftStatus);
      if (leftStatus === 'pending') {
        await expect(call()).rejects.toBeInstanceOf(lib.DuplicateInFlightError);
        await clockPast(record!.leaseExpiresAt!);
        expect(await call()).toEqual({ key, by: 'parent' });
        expect((await store.get(key))?.attempts).toBe(2);
      }
      await call(); // a replay from here on
      expect(logLines(log).length).toBe(totalEffects);
      await store.close();
    });
  }
});
