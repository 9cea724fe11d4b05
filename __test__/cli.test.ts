// The CLI, run as a child process like a user runs it.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, runNode, tempDir } from './helpers';

const CLI = join(ROOT, 'dist', 'cli.js');
const cli = (...args: string[]) => runNode([CLI, ...args]);

let db: string;
let derivedKey: string;

beforeAll(async () => {
  db = join(tempDir(), 'store.db');
  const store = new lib.SqliteStore({ path: db });
  const charge = lib.idempotent(async function charge(order: string) {
    return { charged: order };
  }, { store });
  await charge.withKey('charge-order-42')('o-42');
  await charge('o-43');
  derivedKey = charge.keyFor('o-43');
  await store.close();
});

describe('idempotent-tools CLI', () => {
  it('inspect prints an aligned table of every record', async () => {
    const r = await cli('--db', db, 'inspect');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^KEY\s+ID\s+NAME\s+STATUS\s+ATTEMPTS\s+AGE\s+TOOK\s+EXPIRES\s+SCOPE\s+PROJECT$/);
    expect(lines).toHaveLength(3);
    expect(r.stdout).toContain('charge-order-42');
    expect(r.stdout).toContain(derivedKey);
    const column = lines[0].indexOf('NAME');
    for (const line of lines.slice(1)) expect(line.slice(column, column + 6)).toBe('charge');
  });

  it('inspect --json prints the records as JSON', async () => {
    const r = await cli('--db', db, 'inspect', '--json');
    expect(r.code).toBe(0);
    const records = JSON.parse(r.stdout);
    expect(records.map((x: { key: string }) => x.key).sort()).toEqual(['charge-order-42', derivedKey].sort());
  });

  it('inspect --key shows one record in full, in text and JSON', async () => {
    const text = await cli('--db', db, 'inspect', '--key', 'charge-order-42');
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/status\s+completed/);
    expect(text.stdout).toContain('"charged": "o-42"');
    const json = await cli('--db', db, '--json', 'inspect', '--key', 'charge-order-42');
    expect(JSON.parse(json.stdout).result).toEqual({ charged: 'o-42' });
  });

  it('a missing key is a message on stderr and exit code 1', async () => {
    const r = await cli('--db', db, 'inspect', '--key', 'nope');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/no record with key nope/);
    expect((await cli('--db', db, 'clear', '--key', 'nope')).code).toBe(1);
  });

  it('a bad flag or command prints usage and exits 2', async () => {
    for (const args of [['--bogus'], ['inspect', '--key'], ['explode'], [], ['inspect', 'extra'], ['stats', '--key', 'k']]) {
      const r = await cli('--db', db, ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/Usage: idempotent-tools/);
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    }
  });

  it('--help and --version', async () => {
    const help = await cli('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/inspect --key K/);
    const version = await cli('--version');
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe(require(join(ROOT, 'package.json')).version);
  });

  it('stats counts records by status', async () => {
    const r = await cli('--db', db, 'stats', '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ completed: 2, pending: 0, failed: 0 });
  });

  it('a store file that is not a database: a message naming it, exit 1, no stack trace', async () => {
    const bad = join(tempDir(), 'bad.db');
    require('node:fs').writeFileSync(bad, 'x'.repeat(5000));
    const r = await cli('--db', bad, 'inspect');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(bad);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('a store file that does not exist is not created by inspect', async () => {
    const missing = join(tempDir(), 'missing.db');
    const r = await cli('--db', missing, 'inspect');
    expect(r.code).toBe(1);
    expect(existsSync(missing)).toBe(false);
  });

  it('clear --key deletes one record; clear without a terminal refuses unless --yes', async () => {
    const one = await cli('--db', db, 'clear', '--key', 'charge-order-42');
    expect(one.code).toBe(0);
    expect((await cli('--db', db, 'inspect', '--key', 'charge-order-42')).code).toBe(1);

    const refused = await cli('--db', db, 'clear');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/--yes/);
    expect(JSON.parse((await cli('--db', db, 'inspect', '--json')).stdout)).toHaveLength(1);

    const all = await cli('--db', db, 'clear', '--yes', '--json');
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout)).toEqual({ deleted: 1 });
    expect((await cli('--db', db, 'inspect')).stdout).toMatch(/No records/);
  });

  it('clear on a terminal asks, and deletes only on yes', async () => {
    // `script` (util-linux) gives the CLI a pseudo-terminal, as a person at a shell has.
    const path = join(tempDir(), 'ask.db');
    const store = new lib.SqliteStore({ path });
    await lib.idempotent(async function op() { return 1; }, { store })();
    await store.close();
    const onTerminal = (answer: string) =>
      new Promise<{ code: number | null; out: string }>((done, fail) => {
        const child = require('node:child_process').spawn('script', ['-qec', `${process.execPath} ${CLI} --db ${path} clear`, '/dev/null']);
        let out = '';
        child.stdout.on('data', (d: Buffer) => (out += d));
        child.on('error', fail);
        child.on('close', (code: number | null) => done({ code, out }));
        child.stdin.end(`${answer}\n`);
      });
    const no = await onTerminal('n');
    expect(no.out).toMatch(/Delete the 1 record in /);
    expect(no.out).toMatch(/Nothing deleted/);
    expect(JSON.parse((await cli('--db', path, 'inspect', '--json')).stdout)).toHaveLength(1);
    const yes = await onTerminal('y');
    expect(yes.code).toBe(0);
    expect(yes.out).toMatch(/Deleted 1 record/);
    expect(JSON.parse((await cli('--db', path, 'inspect', '--json')).stdout)).toHaveLength(0);
  });

  it('release --key frees a stuck pending record; prune deletes expired ones', async () => {
    const path = join(tempDir(), 'ops.db');
    const store = new lib.SqliteStore({ path });
    await store.acquire({ key: 'stuck', name: 'op', fingerprint: 'fp', leaseMs: 600_000, force: false });
    // A settled record past its ttl is pruned; a pending one never is, however old (issue 19).
    const old = await store.acquire({ key: 'old', name: 'op', fingerprint: 'fp', leaseMs: 1, ttlMs: 1, force: false });
    if (old.acquired) await store.complete({ key: 'old', token: old.token, resultJson: '1', ttlMs: 1 });
    await store.acquire({ key: 'dead-owner', name: 'op', fingerprint: 'fp', leaseMs: 1, ttlMs: 1, force: false });
    await store.close();
    const released = await cli('--db', path, 'release', '--key', 'stuck');
    expect(released.code).toBe(0);
    expect(released.stdout).toContain('takes it over (attempt 2)');
    // A claim nobody holds: pending, its lease run out (the next call takes it over).
    const after = JSON.parse((await cli('--db', path, 'inspect', '--key', 'stuck', '--json')).stdout);
    expect(after.status).toBe('pending');
    expect(after.leaseExpiresAt).toBeLessThanOrEqual(Date.now());
    expect((await cli('--db', path, 'inspect', '--key', 'stuck')).stdout).toMatch(/lease until .*ran out \d+s ago, its owner not heard from since \(the next call takes it over\)/);
    // Released again, without reconcile: failed.
    const failed = await cli('--db', path, 'release', '--key', 'stuck', '--no-reconcile');
    expect(failed.code).toBe(0);
    expect(failed.stdout).toContain('as failed: the next call with this key runs the function again (attempt 2) without asking reconcile');
    expect(JSON.parse((await cli('--db', path, 'inspect', '--key', 'stuck', '--json')).stdout).status).toBe('failed');
    expect((await cli('--db', path, 'release', '--key', 'stuck')).code).toBe(1); // not pending any more
    expect((await cli('--db', path, 'inspect', '--no-reconcile')).code).toBe(2); // a flag of release only
    const pruned = await cli('--db', path, 'prune', '--json');
    expect(pruned.code).toBe(0);
    // Opening the store (release, above) deleted the expired record already; the dead
    // owner's claim stays.
    expect(JSON.parse(pruned.stdout)).toEqual({ deleted: 0 });
    const stats = JSON.parse((await cli('--db', path, 'stats', '--json')).stdout);
    expect([stats.completed, stats.pending, stats.expired]).toEqual([0, 1, 0]); // the dead owner's claim: pending, never expired
    const left = JSON.parse((await cli('--db', path, 'inspect', '--json')).stdout).map((r: { key: string }) => r.key).sort();
    expect(left).toEqual(['dead-owner', 'stuck']);
  });
});
