// The owner of a claim stopped (SIGSTOP) past its lease, or killed (SIGKILL) after its side
// effect, on every store. A stopped owner's lease runs out while it cannot renew; the next
// caller takes over; when the owner runs again its completion is refused (LeaseLostError)
// and no two runs overlapped while both held live leases. With `reconcile`, the next
// caller finds the owner's run and records it instead of running again.

import { describe, expect, it } from 'vitest';

import { type Kind, Scene, scenesOfThisFile } from './scene';

const KINDS: Kind[] = ['sqlite', 'redis', 'redis-tokio', 'postgres'];
const scene = scenesOfThisFile();

describe.each(KINDS)('%s: owners stopped and killed', (kind) => {
  it('an owner SIGSTOPped inside fn past its lease: taken over, its late completion refused, no overlap of live leases', async () => {
    const s = await scene(kind);
    const owner = await s.owner('o', 'k', { leaseMs: 300 });
    s.stop(owner.child, 'o');
    const b = s.caller('b', { via: 'direct', leaseMs: 300 });
    const fromB = await b.call('k'); // waits out the stopped owner's lease
    expect(fromB.run).toMatch(/^b\./);
    s.cont(owner.child, 'o');
    owner.child.stdin!.write('go\n');
    expect(await owner.done).toBe('LEASE_LOST');
    expect(await b.call('k')).toEqual(fromB);
    const v = await s.verdict();
    expect(v.runs('k'), v.text).toEqual([owner.run, fromB.run]);
    expect(v.clean, v.text).toBe(true);
  });

  it('an owner SIGSTOPped past its lease, a caller with reconcile: the owner\'s run is recorded, fn does not run again', async () => {
    const s = await scene(kind);
    const owner = await s.owner('o', 'k', { leaseMs: 300, reconcile: true });
    s.stop(owner.child, 'o');
    const b = s.caller('b', { via: 'direct', leaseMs: 300, reconcile: true });
    expect(await b.call('k')).toEqual({ run: owner.run });
    s.cont(owner.child, 'o');
    owner.child.stdin!.write('go\n');
    expect(await owner.done).toBe('LEASE_LOST');
    const v = await s.verdict();
    expect(v.runs('k'), v.text).toEqual([owner.run]);
    expect(v.clean, v.text).toBe(true);
  });

  it('an owner SIGKILLed after its side effect: without reconcile the one documented rerun, with it none', async () => {
    const s = await scene(kind);
    const plain = await s.owner('o1', 'plain', { leaseMs: 300 });
    const careful = await s.owner('o2', 'careful', { leaseMs: 300, reconcile: true });
    await s.kill(plain.child, 'o1');
    await s.kill(careful.child, 'o2');
    const b = s.caller('b', { via: 'direct', leaseMs: 300 });
    const c = s.caller('c', { via: 'direct', leaseMs: 300, reconcile: true });
    const rerun = await b.call('plain');
    expect(rerun.run).toMatch(/^b\./);
    expect(await c.call('careful')).toEqual({ run: careful.run });
    const v = await s.verdict();
    expect(v.runs('plain'), v.text).toEqual([plain.run, rerun.run]);
    expect(v.runs('careful'), v.text).toEqual([careful.run]);
    expect(v.clean, v.text).toBe(true);
  });
});
