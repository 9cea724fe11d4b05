// Real processes against one SQLite file: races, kills, and takeovers.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT, collect, lib, lineFrom, tempDb, tempDir } from './helpers';

const WORKER = join(ROOT, '__test__', 'fixtures', 'worker.js');

function worker(mode: string, opts: Record<string, unknown>) {
  return spawn(process.execPath, [WORKER, mode, JSON.stringify(opts)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
}

function logLines(log: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
}

async function clockPast(epochMs: number) {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, epochMs - Date.now() + 1));
}

describe('many processes, one SQLite file', () => {
  it('4 processes racing on the same 200 keys (600 calls in flight each): every side effect runs exactly once', async () => {
    const db = tempDb();
    const log = join(tempDir(), 'effects.log');
    const children = Array.from({ length: 4 }, () => worker('race', { db, log, keys: 200, rounds: 3 }));
    const finished = await Promise.all(children.map(collect));
    for (const f of finished) expect(f.stderr).toBe('');
    expect(finished.map((f) => f.code)).toEqual([0, 0, 0, 0]);

    const ran = logLines(log).map((l) => l.split(' ')[0]);
    expect(ran.length).toBe(200);
    expect(new Set(ran).size).toBe(200);

    // Every process got the one stored result: the same executing pid per key.
    const views = finished.map((f) => JSON.parse(f.stdout.split('RESULTS ')[1]));
    const byKey = new Map(logLines(log).map((l) => l.split(' ') as [string, string]));
    for (const view of views) {
      for (const [key, by] of Object.entries(view)) expect(String(by)).toBe(byKey.get(key));
    }
  });

  it('a process SIGKILLed mid-call leaves a pending record; after the lease the next call takes over and runs once', async () => {
    const db = tempDb();
    const log = join(tempDir(), 'effects.log');
    const key = 'order-7';
    const child = worker('hang', { db, log, key, leaseMs: 1500 });
    const exited = collect(child);
    await lineFrom(child, /RUNNING/);
    child.kill('SIGKILL');
    expect((await exited).signal).toBe('SIGKILL');

    const store = new lib.SqliteStore({ path: db });
    const pending = await store.get(key);
    expect(pending?.status).toBe('pending');
    expect(pending?.attempts).toBe(1);

    let runs = 0;
    const tool = lib.idempotent(async function tool(k: string) {
      runs++;
      return { k, by: 'parent' };
    }, { store, leaseMs: 1500 });

    await clockPast(pending!.leaseExpiresAt!);
    expect(await tool.withKey(key)(key)).toEqual({ k: key, by: 'parent' });
    expect(await tool.withKey(key)(key)).toEqual({ k: key, by: 'parent' });
    expect(runs).toBe(1);
    const record = await store.get(key);
    expect(record?.status).toBe('completed');
    expect(record?.attempts).toBe(2);
    expect(logLines(log).length).toBe(1); // the dead child's one run; the parent's is `runs`
    await store.close();
  });

  it("a dead owner's fencing token is refused after a takeover", async () => {
    const db = tempDb();
    const key = 'order-8';
    const child = worker('acquire-and-hang', { db, key, fingerprint: 'fp', leaseMs: 300 });
    const exited = collect(child);
    const token = (await lineFrom(child, /^TOKEN /)).slice('TOKEN '.length).trim();
    child.kill('SIGKILL');
    await exited;

    const store = new lib.SqliteStore({ path: db });
    const pending = await store.get(key);
    await clockPast(pending!.leaseExpiresAt!);
    const claim = await store.acquire({ key, name: 'tool', fingerprint: 'fp', leaseMs: 60_000, force: false });
    expect(claim.acquired && claim.takenOver).toBe(true);
    expect(await store.complete({ key, token, resultJson: '"from the dead"' })).toBe(false);
    expect(await store.renew(key, token, 60_000)).toBe(false);
    expect(await store.fail({ key, token, error: { name: 'E', message: 'late' } })).toBe(false);
    expect((await store.get(key))?.status).toBe('pending');
    await store.close();
  });

  it('a completion is durable before the promise resolves: a process killed right after it sees the result never runs again', async () => {
    const db = tempDb();
    const log = join(tempDir(), 'effects.log');
    for (let i = 0; i < 3; i++) {
      const child = worker('complete-then-die', { db, log, key: 'charge-1' });
      const f = await collect(child);
      expect(f.signal).toBe('SIGKILL');
      expect(f.stdout).toMatch(/^DONE /);
    }
    expect(logLines(log).length).toBe(1);
  });

  it('8 processes opening one brand-new file at the same moment all succeed', async () => {
    const db = tempDb();
    const log = join(tempDir(), 'effects.log');
    const finished = await Promise.all(
      Array.from({ length: 8 }, () => collect(worker('race', { db, log, keys: 1, rounds: 1 }))),
    );
    for (const f of finished) expect(f.stderr).toBe('');
    expect(finished.map((f) => f.code)).toEqual(Array(8).fill(0));
    expect(logLines(log).length).toBe(1);
  });
});
