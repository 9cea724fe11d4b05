// The Redis server killed and restarted while a call's side effect is running, before its
// result is recorded. With `appendonly yes` and `appendfsync always` the claim survives:
// the settle goes through, the caller gets its result, and nothing runs twice. Without its
// data (a server without persistence) the record is gone: the restart begins a new epoch
// (the checker's term), and a call after it runs again, by the restart's doing.

import { describe, expect, it } from 'vitest';

import { REDIS, Scene, scenesOfThisFile } from './scene';

const scene = scenesOfThisFile();

/** A gate a run waits at, and a promise that the run has started. */
function gate() {
  let open!: () => void;
  let started!: (run: string) => void;
  const opened = new Promise<void>((r) => (open = r));
  const running = new Promise<string>((r) => (started = r));
  return { open, running, onRun: (run: string) => started(run), work: () => opened };
}

describe.each(REDIS)('%s: the server restarted between run and settle', (kind) => {
  it('with appendfsync always: the claim survives, the result is recorded, one run', async () => {
    const s = await scene(kind);
    const g = gate();
    const a = s.caller('a', { leaseMs: 2000, onRun: g.onRun, work: g.work });
    const b = s.caller('b', { via: 'direct', leaseMs: 2000 });
    const call = a.call('k');
    const run = await g.running;
    await s.server.restart();
    g.open();
    expect(await call).toEqual({ run });
    expect(await b.call('k')).toEqual({ run });
    const v = await s.verdict();
    expect(v.runs('k'), v.text).toEqual([run]);
    expect(v.clean, v.text).toBe(true);
  });

  it('without its data: a new epoch; the old call is told its result was not recorded, the next call runs again', async () => {
    const s = await scene(kind);
    const g = gate();
    const a = s.caller('a', { leaseMs: 2000, onRun: g.onRun, work: g.work });
    const b = s.caller('b', { via: 'direct', leaseMs: 2000 });
    const call = a.call('k');
    const run = await g.running;
    await s.server.restart({ lose: true, between: async () => s.ledger.write({ ev: 'epoch', why: 'redis restarted without its data' }) });
    g.open();
    const fromA = await call;
    expect(fromA.error?.code, JSON.stringify(fromA)).toBe('LEASE_LOST');
    // What was seen: the record went away, not "another call took it over".
    expect(fromA.error?.message).toMatch(/record of its key .*went away/);
    const fromB = await b.call('k');
    expect(fromB.run).toMatch(/^b\./);
    const v = await s.verdict();
    expect(v.runs('k'), v.text).toEqual([run, fromB.run]);
    expect(v.clean, v.text).toBe(true);
  });
});
