// The fault checker (stress/faults/checker.js) on made-up ledgers: each kind of violation
// is found, and what the library may do (a documented rerun after a kill, a takeover after
// a lossy restart, a LeaseLostError whose run a reconcile recorded) is not one. Then the
// campaign itself: a short one on SQLite comes out clean, and the naive control is caught.

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT, runNode } from '../helpers';
import { check } from './scene';

const CAMPAIGN = join(ROOT, 'stress', 'faults', 'campaign.js');

/** A little ledger language: each helper returns entries at the given times. */
const call = (t: number, id: string, key: string, extra: object = {}) => ({ t, ev: 'call', call: id, key, who: id.split(':')[0], leaseMs: 300, mode: 'block', reconcile: false, ...extra });
const claim = (t: number, id: string, key: string, sent: number, extra: object = {}) => ({ t, ev: 'acquire', call: id, key, sent, leaseMs: 300, acquired: true, takenOver: false, attempts: 1, token: `tok-${id}`, ...extra });
const run = (t: number, id: string, key: string, runId: string) => ({ t, ev: 'run', call: id, key, run: runId });
const runEnd = (t: number, id: string, key: string, runId: string, threw = false) => ({ t, ev: 'run-end', call: id, key, run: runId, threw });
const settle = (t: number, id: string, key: string, runId: string, ok: boolean, op = 'complete') => ({ t, ev: 'settle', call: id, key, op, sent: t - 1, token: `tok-${id}`, run: runId, ok });
const ret = (t: number, id: string, key: string, runId: string) => ({ t, ev: 'ret', call: id, key, run: runId });
const err = (t: number, id: string, key: string, code: string | undefined, message: string, extra: object = {}) => ({ t, ev: 'err', call: id, key, name: code ? 'IdempotencyError' : 'Error', code, message, ...extra });

/** One call that claims, runs and completes `key` as run `r` over [t, t + 50]. */
function whole(t: number, id: string, key: string, r: string, extra: object = {}) {
  return [call(t, id, key), claim(t + 5, id, key, t + 1, extra), run(t + 10, id, key, r), runEnd(t + 40, id, key, r), settle(t + 45, id, key, r, true), ret(t + 50, id, key, r)];
}

function verdict(entries: any[], finals: object = {}) {
  const result = check([...entries].sort((a, b) => a.t - b.t), { finals, hangBoundMs: 10_000 });
  return { kinds: Object.keys(result.byKind).sort(), result };
}

describe('the fault checker', () => {
  it('a clean history: one run, its result to every caller', () => {
    const { kinds, result } = verdict([...whole(0, 'a:1', 'k', 'a.1'), call(100, 'b:1', 'k'), ret(110, 'b:1', 'k', 'a.1')], { k: { status: 'completed', run: 'a.1' } });
    expect(kinds).toEqual([]);
    expect(result.clean).toBe(true);
  });

  it('run-after-result and late-run: a claim that came back after its lease ran fn after another caller\'s result', () => {
    const { kinds } = verdict([
      call(0, 'a:1', 'k'),
      ...whole(10, 'b:1', 'k', 'b.1'),
      claim(700, 'a:1', 'k', 1, { attempts: 1 }),
      run(701, 'a:1', 'k', 'a.1'),
      runEnd(710, 'a:1', 'k', 'a.1'),
      settle(720, 'a:1', 'k', 'a.1', false),
      err(721, 'a:1', 'k', 'LEASE_LOST', 'lost', { run: 'a.1' }),
    ]);
    expect(kinds).toEqual(['late-run', 'run-after-result']);
  });

  it('overlap: two runs of a key while both held live leases', () => {
    const { kinds } = verdict([
      call(0, 'a:1', 'k'), claim(2, 'a:1', 'k', 1), run(3, 'a:1', 'k', 'a.1'),
      call(5, 'b:1', 'k'), claim(7, 'b:1', 'k', 6, { attempts: 2, takenOver: true }), run(8, 'b:1', 'k', 'b.1'),
      runEnd(50, 'a:1', 'k', 'a.1'), runEnd(60, 'b:1', 'k', 'b.1'),
      settle(70, 'b:1', 'k', 'b.1', true), ret(71, 'b:1', 'k', 'b.1'),
      settle(72, 'a:1', 'k', 'a.1', false), err(73, 'a:1', 'k', 'LEASE_LOST', 'lost', { run: 'a.1' }),
    ]);
    expect(kinds).toEqual(['overlap']);
  });

  it('two-completions, not-first-result and different-results', () => {
    const { kinds } = verdict([...whole(0, 'a:1', 'k', 'a.1'), ...whole(1000, 'b:1', 'k', 'b.1', { attempts: 2, takenOver: true })]);
    expect(kinds).toContain('two-completions');
    expect(kinds).toContain('not-first-result');
    expect(kinds).toContain('different-results');
  });

  it('takeover-forgotten: a claim answered as fresh right after a claim that ran and did not fail', () => {
    const { kinds } = verdict([
      call(0, 'o:1', 'k'), claim(2, 'o:1', 'k', 1), run(3, 'o:1', 'k', 'o.1'),
      { t: 20, ev: 'kill', worker: 'o' },
      ...whole(400, 'a:1', 'k', 'a.1', { attempts: 2, takenOver: false }),
    ]);
    expect(kinds).toEqual(['takeover-forgotten']);
  });

  it('not a violation: a fresh claim after a declined run, and a rerun after a kill (the documented window)', () => {
    const { kinds } = verdict([
      call(0, 'a:1', 'k'), claim(2, 'a:1', 'k', 1), run(3, 'a:1', 'k', 'a.1'), runEnd(4, 'a:1', 'k', 'a.1', true),
      settle(5, 'a:1', 'k', 'a.1', true, 'fail'), { t: 6, ev: 'err', call: 'a:1', key: 'k', name: 'DeclinedError', message: 'declined', run: 'a.1' },
      ...whole(100, 'b:1', 'j', 'b.1'),
      call(200, 'o:1', 'm'), claim(202, 'o:1', 'm', 201), run(203, 'o:1', 'm', 'o.1'), { t: 210, ev: 'kill', worker: 'o' },
      ...whole(600, 'c:1', 'm', 'c.1', { attempts: 2, takenOver: true }),
      ...whole(700, 'd:1', 'k', 'd.1', { attempts: 2, takenOver: false }),
    ]);
    expect(kinds).toEqual([]);
  });

  it('reconcile-skipped: a second run of a key whose callers all reconcile', () => {
    const { kinds } = verdict([
      call(0, 'o:1', 'k', { reconcile: true }), claim(2, 'o:1', 'k', 1), run(3, 'o:1', 'k', 'o.1'),
      { t: 20, ev: 'kill', worker: 'o' },
      call(400, 'a:1', 'k', { reconcile: true }), claim(405, 'a:1', 'k', 401, { attempts: 2, takenOver: true }),
      run(410, 'a:1', 'k', 'a.1'), runEnd(420, 'a:1', 'k', 'a.1'), settle(430, 'a:1', 'k', 'a.1', true), ret(431, 'a:1', 'k', 'a.1'),
    ]);
    expect(kinds).toEqual(['reconcile-skipped']);
  });

  it('untyped-error and false-message: an error not ours, and messages that are not true', () => {
    const { kinds, result } = verdict([
      call(0, 'a:1', 'k'), err(5, 'a:1', 'k', undefined, 'socket hang up'),
      // A StoreError that says nothing ran, but the call ran.
      call(10, 'b:1', 'j'), claim(12, 'b:1', 'j', 11), run(13, 'b:1', 'j', 'b.1'), err(20, 'b:1', 'j', 'STORE_ERROR', 'idempotent-tools: Redis acquire failed'),
      { t: 21, ev: 'kill', worker: 'b' },
      // "could not be recorded", but it was.
      call(30, 'c:1', 'm'), claim(32, 'c:1', 'm', 31), run(33, 'c:1', 'm', 'c.1'), runEnd(40, 'c:1', 'm', 'c.1'),
      err(50, 'c:1', 'm', 'STORE_ERROR', 'idempotent-tools: "x" ran, but its result could not be recorded (reset). The record stays pending'),
      call(60, 'd:1', 'm'), ret(61, 'd:1', 'm', 'c.1'),
    ], { m: { status: 'completed', run: 'c.1' } });
    expect(kinds).toEqual(['false-message', 'untyped-error']);
    expect(result.byKind['false-message']).toBe(2);
  });

  it('a LeaseLostError is true when its own completion was refused, also if a reconcile recorded its run', () => {
    const { kinds } = verdict([
      call(0, 'o:1', 'k', { reconcile: true }), claim(2, 'o:1', 'k', 1), run(3, 'o:1', 'k', 'o.1'),
      { t: 10, ev: 'stop', worker: 'o' },
      call(400, 'a:1', 'k', { reconcile: true }), claim(405, 'a:1', 'k', 401, { attempts: 2, takenOver: true }),
      { t: 406, ev: 'reconcile', call: 'a:1', key: 'k', happened: true, run: 'o.1' },
      settle(410, 'a:1', 'k', 'o.1', true), ret(411, 'a:1', 'k', 'o.1'),
      { t: 500, ev: 'cont', worker: 'o' },
      runEnd(501, 'o:1', 'k', 'o.1'), settle(505, 'o:1', 'k', 'o.1', false), err(506, 'o:1', 'k', 'LEASE_LOST', 'lost', { run: 'o.1' }),
    ], { k: { status: 'completed', run: 'o.1' } });
    expect(kinds).toEqual([]);
  });

  it('epochs: after a restart without persistence, a rerun is no violation; before it, it is', () => {
    const entries = [...whole(0, 'a:1', 'k', 'a.1'), ...whole(1000, 'b:1', 'k', 'b.1')];
    expect(verdict(entries).kinds).toContain('run-after-result');
    expect(verdict([...entries, { t: 500, ev: 'epoch', why: 'redis restarted without its data' }], { k: { status: 'completed', run: 'b.1' } }).kinds).toEqual([]);
  });

  it('a clear of one key: a rerun of that key after it is no violation; of another key, it still is', () => {
    const cleared = { t: 520, ev: 'epoch', key: 'k', from: 500, why: 'cleared by an operator' };
    const entries = [...whole(0, 'a:1', 'k', 'a.1'), ...whole(1000, 'b:1', 'k', 'b.1'), ...whole(0, 'c:1', 'j', 'c.1'), ...whole(1000, 'd:1', 'j', 'd.1')];
    const { result } = verdict([...entries, cleared], { k: { status: 'completed', run: 'b.1' }, j: { status: 'completed', run: 'd.1' } });
    expect(result.violations.filter((v: { detail: string }) => v.detail.startsWith('k:'))).toEqual([]);
    expect(result.violations.filter((v: { detail: string }) => v.detail.startsWith('j:')).map((v: { kind: string }) => v.kind)).toContain('run-after-result');
  });

  it('a clear\'s window: calls and runs inside it are held to neither epoch; after it, to the new one', () => {
    // The clear was sent at 500 and answered at 520; the record was deleted somewhere in
    // between. c:1 (500..510) got the old result (read before the deletion); d:1 claimed
    // afresh and started its run at 518 (after the deletion). Neither is a violation...
    const cleared = { t: 520, ev: 'epoch', key: 'k', from: 500, why: 'cleared by an operator' };
    const base = [...whole(0, 'a:1', 'k', 'a.1'), cleared, call(500, 'c:1', 'k'), ret(510, 'c:1', 'k', 'a.1'), ...whole(508, 'd:1', 'k', 'd.1'), call(1000, 'f:1', 'k'), ret(1010, 'f:1', 'k', 'd.1')];
    expect(verdict(base, { k: { status: 'completed', run: 'd.1' } }).kinds).toEqual([]);
    // ...but a run after f:1, a call wholly in the new epoch, was given d.1's result still is.
    expect(verdict([...base, ...whole(2000, 'e:1', 'k', 'e.1')], { k: { status: 'completed', run: 'd.1' } }).kinds).toContain('run-after-result');
  });

  it('hang and crash: a call that never ended in a live worker, one past the bound, a worker that would not stop or died by itself', () => {
    const { result } = verdict([
      call(0, 'a:1', 'k'),
      call(10, 'b:1', 'j'), err(20_000, 'b:1', 'j', 'IN_FLIGHT_TIMEOUT', 'waited'),
      { t: 30_000, ev: 'worker-hung', worker: 'c', waitedMs: 30_000 },
      { t: 30_001, ev: 'worker-crash', worker: 'd', how: 'exit 3' },
    ]);
    expect(result.byKind).toEqual({ hang: 3, crash: 1 });
  });
});

describe('the fault campaign', () => {
  it('SQLite, 5 s, workers killed and stopped: CLEAN', async () => {
    const r = await runNode([CAMPAIGN, '--store', 'sqlite', '--seconds', '5', '--seed', '28', '--workers', '3']);
    expect(r.stdout, r.stderr).toMatch(/faults sqlite seed=28: CLEAN/);
    expect(r.code, r.stdout).toBe(0);
  });

  it('the naive control (get, then run, then set) under the same nemesis: caught', async () => {
    const r = await runNode([CAMPAIGN, '--store', 'sqlite', '--seconds', '5', '--seed', '28', '--workers', '3', '--control', 'naive']);
    expect(r.stdout, r.stderr).toMatch(/control caught \(\d+ violations, as it must\)/);
    expect(r.stdout).toMatch(/different-results|run-after-result|reconcile-skipped/);
    expect(r.code, r.stdout).toBe(0);
  });

  it('refuses a --weight for a fault the store cannot have, and names the faults it can', async () => {
    const r = await runNode([CAMPAIGN, '--store', 'sqlite', '--seconds', '1', '--weight', 'restart-lossy=3']);
    expect(r.stderr).toMatch(/--weight restart-lossy: --store sqlite has no such fault; its faults are none/);
    expect(r.code).toBe(2);
    const bad = await runNode([CAMPAIGN, '--store', 'redis', '--seconds', '1', '--weight', 'restart-lossy']);
    expect(bad.stderr).toMatch(/--weight takes FAULT=N \(such as restart-lossy=3\), not "restart-lossy"/);
    expect(bad.code).toBe(2);
  });

  it('refuses a store it does not know, and says which it knows', async () => {
    const r = await runNode([CAMPAIGN, '--store', 'mysql', '--seconds', '1']);
    expect(r.stderr).toMatch(/--store must be one of sqlite, redis, redis-tokio, redis-cluster, postgres, not "mysql"/);
    expect(r.code).toBe(2);
  });
});
