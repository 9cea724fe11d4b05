// A claim whose reply comes after its lease is over (a stalled network, a paused VM):
// issue 28, item 1. Caller A's replies are held at the proxy from the moment its claim goes
// up; caller B (straight to the server) waits out A's lease, takes the key over, runs it
// and gets its result; only then are A's replies let through. A must not run fn: its
// lease, counted from when it sent the claim, is over. It replays B's result instead.

import { describe, expect, it } from 'vitest';

import { NETWORK, Scene, scenesOfThisFile } from './scene';

const scene = scenesOfThisFile();
/** Long enough to be found in the bytes that go up: the first request that names it is its claim. */
const KEY = 'the-late-claimed-key';

describe.each(NETWORK)('%s: replies held past the lease', (kind) => {
  it('replies held until another caller took over and finished: the late claim never runs fn, the other caller\'s result stands', async () => {
    const s = await scene(kind);
    const a = s.caller('a', { leaseMs: 300 });
    const b = s.caller('b', { via: 'direct', leaseMs: 300 });
    await a.call('warm-up'); // A's connections are open: what goes up next is the claim

    // The first request that names the key is its claim (Redis's SET NX GET, Postgres's Bind of the claim).
    const held = s.onNextRequest((conn) => conn.hold('down'), KEY);
    const late = a.call(KEY);
    const conn = await held;
    await s.claimed(KEY);
    // B finds A's claim, waits out its lease (A cannot renew: it never got its token), takes over.
    const fromB = await b.call(KEY);
    expect(fromB.run, JSON.stringify(fromB)).toMatch(/^b\./);
    conn.release('down');
    const fromA = await late;

    const v = await s.verdict();
    expect(v.runs(KEY), v.text).toEqual([fromB.run]);
    expect(fromA, v.text).toEqual({ run: fromB.run });
    expect(v.clean, v.text).toBe(true);
  });

  it('every connection held (a stalled network) while another caller takes three keys over: the claims that come back late run nothing', async () => {
    const s = await scene(kind);
    const a = s.caller('a', { leaseMs: 300 });
    const b = s.caller('b', { via: 'direct', leaseMs: 300 });
    await a.call('warm-up');

    const keys = [`${KEY}-1`, `${KEY}-2`, `${KEY}-3`];
    const up = s.onNextRequest(() => s.proxy.all.hold('down'), KEY);
    const late = keys.map((k) => a.call(k));
    await up;
    await s.claimed(keys[0]); // (the others may still be on their way: then B claims them first, and A replays)
    // B takes each key over in turn (the first after waiting out A's lease).
    const fromB = [];
    for (const k of keys) fromB.push(await b.call(k));
    s.proxy.all.release('down');
    const fromA = await Promise.all(late);

    const v = await s.verdict();
    keys.forEach((k, i) => {
      expect(v.runs(k), v.text).toEqual([fromB[i].run]);
      expect(fromA[i], v.text).toEqual({ run: fromB[i].run });
    });
    expect(v.clean, v.text).toBe(true);
  });
});
