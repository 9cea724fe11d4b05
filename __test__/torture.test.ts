// A short torture run on each store (the full one: node stress/torture.js --seconds 600),
// and the verdict itself: made-up logs that it must refuse, and a worker that crashes.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, runNode, tempDir } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';
import { sharedRedis } from './redis-server';

const TORTURE = join(ROOT, 'stress', 'torture.js');
const redis = await sharedRedis();
afterAll(async () => {
  await redis.stop();
  await dropTables();
});

describe.concurrent('torture (short)', () => {
  for (const store of ['sqlite', 'redis', 'postgres']) {
    it(`${store}: 8 processes, random kills, mixed raise/block/retry: clean verdict`, async () => {
      const r = await runNode([TORTURE, '--store', store, '--seconds', '6', '--redis', redis.url, '--postgres', PG_URL, '--table', uniqueTable()]);
      expect(r.stdout, r.stderr).toMatch(/: CLEAN: /);
      expect(r.stdout).toMatch(/0 crashed/);
      expect(r.stdout).toMatch(/0 unexplained/);
      expect(r.code).toBe(0);
    });
  }
});

/** The verdict on a made-up log (and the store's final records, when given). */
async function verdict(lines: string[], finals?: Record<string, { by: number; attempt: number }>) {
  const dir = tempDir();
  const log = join(dir, 'effects.log');
  writeFileSync(log, lines.join('\n') + '\n');
  const args = [TORTURE, '--verify', log];
  if (finals) {
    writeFileSync(join(dir, 'finals.json'), JSON.stringify(finals));
    args.push('--finals', join(dir, 'finals.json'));
  }
  const r = await runNode(args);
  expect(r.stderr).toBe('');
  const line = r.stdout.trim();
  return JSON.parse(line.slice(0, line.indexOf('}') + 1));
}

describe('the torture verdict catches what it is about', () => {
  it('a duplicate that no retry, kill or lost lease explains (before: counted as "after kills")', async () => {
    const v = await verdict([
      'start g0-k1 100 raise 1',
      'effect g0-k1 100 raise 1',
      'start g0-k1 200 raise 1',
      'effect g0-k1 200 raise 1',
      'recorded g0-k1 200',
    ]);
    expect([v.duplicates, v.unexplained, v.afterKill, v.byRetry]).toEqual([1, 1, 0, 0]);
  });

  it('explains duplicates by a retry, by a kill between effect and record, and by a lease that ran out', async () => {
    const v = await verdict([
      'start g0-k1 100 raise 1',
      'effect g0-k1 100 raise 1',
      'start g0-k1 200 retry 1',
      'effect g0-k1 200 retry 1',
      'recorded g0-k1 200',
      'lost g0-k1 100',
      'start g0-k2 100 raise 2',
      'effect g0-k2 100 raise 2',
      'killed 100',
      'start g0-k2 300 block 1',
      'effect g0-k2 300 block 1',
      'recorded g0-k2 300',
      'start g0-k3 300 raise 2',
      'effect g0-k3 300 raise 2',
      'start g0-k3 400 raise 1',
      'effect g0-k3 400 raise 1',
      'recorded g0-k3 400',
      'lost g0-k3 300',
    ]);
    expect([v.duplicates, v.byRetry, v.afterKill, v.afterLeaseLoss, v.unexplained, v.violations]).toEqual([3, 1, 1, 1, 0, 0]);
  });

  it('a worker killed between its commit and its log line no longer hides a later re-run', async () => {
    const lines = [
      'start g0-k1 100 raise 1',
      'effect g0-k1 100 raise 1',
      // (100 committed here; the kill came before its "recorded" line)
      'killed 100',
      'start g0-k1 200 block 1',
      'effect g0-k1 200 block 1',
    ];
    // From the log alone, the re-run looks like a takeover after a kill.
    expect((await verdict(lines)).violations).toBe(0);
    // The store's final record names 100's execution: its commit came before the kill.
    const v = await verdict(lines, { 'g0-k1': { by: 100, attempt: 1 } });
    expect([v.hiddenCommits, v.violations]).toEqual([1, 1]);
  });

  it('a worker that crashes from a bug fails the run (before: it looked like a planned kill)', async () => {
    const r = await runNode([TORTURE, '--store', 'sqlite', '--seconds', '3', '--workers', '2', '--inject-crash']);
    expect(r.stdout).toMatch(/: FAILED: .*1 crashed/);
    expect(r.stdout).toMatch(/injected crash/);
    expect(r.code).toBe(1);
  });
});
