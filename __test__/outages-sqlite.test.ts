// The disk and the file system failing under a live SqliteStore: a full disk, a read-only
// file system, the store's folder removed. Each time: a StoreError, no side effect without
// a record, and recovery in the same process once the cause is gone. Uses tmpfs mounts
// (the tests run as root in CI).

import { execFileSync } from 'node:child_process';
import { mkdirSync, openSync, rmSync, writeSync, closeSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { lib, runNode, ROOT, tempDir } from './helpers';

const { idempotent, SqliteStore, StoreError } = lib;
const mounts: string[] = [];
afterAll(() => {
  for (const m of mounts) {
    try {
      execFileSync('umount', [m]);
    } catch {
      // already unmounted
    }
  }
});

function tmpfs(sizeKb: number): string {
  const dir = join(tempDir(), 'mnt');
  mkdirSync(dir);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKb}k`, 'tmpfs', dir]);
  } catch (err) {
    throw new Error(`these tests mount a small tmpfs and need root (CI runs as root): ${(err as Error).message}`);
  }
  mounts.push(dir);
  return dir;
}

/** Fills the file system at `dir` until writing fails; returns the filler's path. */
function fill(dir: string): string {
  const filler = join(dir, 'filler');
  const fd = openSync(filler, 'w');
  const chunk = Buffer.alloc(4096, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC');
  } finally {
    closeSync(fd);
  }
  return filler;
}

async function clockPast(epochMs: number) {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, epochMs - Date.now() + 1));
}

function counted(store: InstanceType<typeof SqliteStore>) {
  const state = { runs: 0 };
  const op = idempotent(async function op(n: string) {
    state.runs++;
    return n;
  }, { store, maxKeyBytes: 8_000_000 }); // the full-disk tests below claim keys of megabytes
  return { op, state };
}

describe('SqliteStore outages', () => {
  // A key too big to fit: the claim cannot be written, so fn must not run. At 600 KB the
  // claim fails at COMMIT; at 4 MB (more than the writer's page cache) SQLite spills it to
  // the WAL inside its own job, hits the full disk there and rolls back the whole
  // transaction itself: the cause must still be what the caller hears.
  it.each([
    ['fails at commit', 600_000],
    ['spills inside its job', 4_000_000],
  ])('a full disk, a claim that %s: StoreError naming the cause, fn not run; works again once there is space', async (_, size) => {
    const dir = tmpfs(1024);
    const store = new SqliteStore({ path: join(dir, 'store.db') });
    const { op, state } = counted(store);
    expect(await op('before')).toBe('before');
    const filler = fill(dir);

    const err = await op.withKey('k'.repeat(size))('x').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toMatch(/full/);
    expect((err as Error).message).not.toMatch(/savepoint/);
    expect((err as Error).message).toContain(dir);
    expect(state.runs).toBe(1);

    rmSync(filler);
    expect(await op('after')).toBe('after');
    expect(await op('after')).toBe('after');
    expect(state.runs).toBe(2);
    await store.close();
  });

  it('a full disk and a small claim: StoreError, fn not run, nothing recorded; works again once there is space', async () => {
    const dir = tmpfs(1024);
    const store = new SqliteStore({ path: join(dir, 'store.db') });
    const { op, state } = counted(store);
    expect(await op('before')).toBe('before');
    const filler = fill(dir);

    // An ordinary key: the claim needs one more WAL frame, and there is no room for it.
    const err = await op('small').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toMatch(/full/);
    expect((err as Error).message).toContain(dir);
    expect(state.runs).toBe(1);
    expect(await store.get(op.keyFor('small'))).toBeNull(); // reads still work; no half claim

    rmSync(filler);
    expect(await op('small')).toBe('small');
    expect(await op('small')).toBe('small');
    expect(state.runs).toBe(2);
    await store.close();
  });

  it('a disk that fills while fn runs: the completion cannot be written; StoreError, the claim stays, and after its lease the call runs again once', async () => {
    const dir = tmpfs(1024);
    const store = new SqliteStore({ path: join(dir, 'store.db') });
    expect(await counted(store).op('warm-up')).toBe('warm-up');
    let filler: string | undefined;
    let runs = 0;
    const pay = idempotent(async function pay(order: string) {
      runs++;
      if (filler === undefined) filler = fill(dir); // the side effect happened; now no space
      return { order, paid: true };
    }, { store, leaseMs: 1500 });

    const err = await pay('order-1').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toMatch(/full/);
    expect(runs).toBe(1);
    // The side effect is not left without a record: the claim is there, pending.
    const pending = await store.get(pay.keyFor('order-1'));
    expect([pending?.status, pending?.attempts]).toEqual(['pending', 1]);

    rmSync(filler!);
    await clockPast(pending!.leaseExpiresAt!);
    // The documented crash window: the next call after the lease runs again (reconcile
    // can ask the outside world first), once, and its completion is kept.
    expect(await pay('order-1')).toEqual({ order: 'order-1', paid: true });
    expect(await pay('order-1')).toEqual({ order: 'order-1', paid: true });
    expect(runs).toBe(2);
    const record = await store.get(pay.keyFor('order-1'));
    expect([record?.status, record?.attempts]).toEqual(['completed', 2]);
    await store.close();
  });

  it('a read-only store file: StoreError naming it, fn not run; works once writable, without a new store', async () => {
    const source = join(tempDir(), 'state');
    mkdirSync(source);
    const path = join(source, 'store.db');
    const seed = new SqliteStore({ path });
    await counted(seed).op('seeded');
    await seed.close();

    // The same folder seen through a read-only bind mount.
    const view = join(tempDir(), 'view');
    mkdirSync(view);
    execFileSync('mount', ['--bind', source, view]);
    mounts.push(view);
    execFileSync('mount', ['-o', 'remount,ro,bind', view]);

    const store = new SqliteStore({ path: join(view, 'store.db') });
    const { op, state } = counted(store);
    const err = await op('during').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toContain(view);
    expect(state.runs).toBe(0);

    execFileSync('mount', ['-o', 'remount,rw,bind', view]);
    expect(await op('after')).toBe('after');
    expect(await op('seeded')).toBe('seeded'); // the record written before is there
    expect(state.runs).toBe(1);
    await store.close();
  });

  it("the store's folder removed while running: recreated at its path, seen by other processes", async () => {
    const dir = join(tempDir(), 'state');
    const path = join(dir, 'store.db');
    const store = new SqliteStore({ path });
    const { op, state } = counted(store);
    expect(await op('one')).toBe('one');
    rmSync(dir, { recursive: true });

    expect(await op('two')).toBe('two');
    expect(existsSync(path)).toBe(true);
    const cli = await runNode([join(ROOT, 'dist', 'cli.js'), '--db', path, 'inspect', '--json']);
    expect(JSON.parse(cli.stdout).map((r: { result: string }) => r.result)).toEqual(['two']);
    expect(await op('two')).toBe('two');
    expect(state.runs).toBe(2);
    await store.close();
  });

  it('the folder removed and impossible to recreate: StoreError naming the path, fn not run', async () => {
    const dir = join(tempDir(), 'state');
    const path = join(dir, 'store.db');
    const store = new SqliteStore({ path });
    const { op, state } = counted(store);
    await op('one');
    rmSync(dir, { recursive: true });
    execFileSync('touch', [dir]); // a file where the folder was
    const err = await op('two').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toContain(path);
    expect(state.runs).toBe(1);
    rmSync(dir);
    expect(await op('two')).toBe('two');
    await store.close();
  });
});
