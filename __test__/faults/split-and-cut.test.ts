// Replies in pieces, and replies cut off: every reply split into 1-byte writes (a store
// client must parse across reads), and a claim's reply cut after k bytes for every k, then
// the connection reset. One run per key, every result the recorded one, whatever the
// store makes of the cut (a resend, or StoreError and the caller calls again).

import { describe, expect, it } from 'vitest';

import { NETWORK, Scene, scenesOfThisFile } from './scene';

const scene = scenesOfThisFile();


describe.each(NETWORK)('%s: replies in pieces', (kind) => {
  it('every byte each way in a write of its own: calls, replays, a declined run and a takeover all work', async () => {
    const s = await scene(kind);
    s.proxy.all.split(1, 1, 'both');
    let declines = 0;
    // Leases long enough for a connection set up one byte at a time: this test is about
    // parsing replies in pieces (a claim that comes back after its lease is late-replies.test.ts's).
    const a = s.caller('a', { leaseMs: 3000, decline: (key) => key === 'declined' && declines++ === 0 });
    const b = s.caller('b', { via: 'direct', leaseMs: 3000 });
    const first = await a.call('k1');
    expect(await a.call('k1')).toEqual(first); // a replay, in pieces
    expect(await b.call('k1')).toEqual(first);
    expect((await a.call('declined')).error?.name).toBe('DeclinedError');
    const again = await a.call('declined'); // runs again after a failure
    expect(again.run).toBeDefined();
    const owner = await s.owner('o', 'k2', { via: 'proxy', leaseMs: 3000 });
    await s.kill(owner.child, 'o');
    const taken = await a.call('k2'); // waits out the dead owner's lease, takes over
    expect(taken.run).toMatch(/^a\./);
    const v = await s.verdict();
    expect(s.proxy.connections.some((c: any) => c.writes.down > 20), 'replies went through in pieces').toBe(true);
    expect(v.clean, v.text).toBe(true);
  });
});

describe.each(NETWORK)('%s: a claim\'s reply cut short', (kind) => {
  it('cut after k bytes, then reset, for every k of a new call\'s claim reply: one run per key', async () => {
    const s = await scene(kind);
    const a = s.caller('a', { leaseMs: 200 });
    const b = s.caller('b', { via: 'direct', leaseMs: 200 });
    await a.call('warm-up');

    // How long the claim's reply is: the bytes that come back on its connection before the
    // next request goes up there.
    let length = 0;
    let measuring = true;
    const claimed = s.onNextRequest((c, claim) => {
      c.onChunk('down', (chunk: Buffer) => measuring && (length += chunk.length));
      c.onChunk('up', (chunk: Buffer) => chunk !== claim && (measuring = false));
    }, 'measure-key'); // a new call's claim is the first request that names its key
    await a.call('measure-key');
    await claimed;
    measuring = false;
    expect(length).toBeGreaterThan(0);

    for (let k = 0; k < length; k++) {
      const key = `cut-${k}-key`;
      const cut = s.onNextRequest((c) => c.cutAfter(k, 'down'), key);
      const got = await a.untilResult(key);
      await cut;
      const fromB = await b.call(key);
      const v = await s.verdict();
      if (k === 0) console.log(`${kind}: the claim's reply is ${length} bytes`);
      expect(v.runs(key), `k=${k} of ${length}\n${v.text}`).toHaveLength(1);
      expect(got[got.length - 1], `k=${k}\n${v.text}`).toEqual({ run: v.runs(key)[0] });
      expect(fromB).toEqual({ run: v.runs(key)[0] });
    }
    const v = await s.verdict();
    expect(v.clean, v.text).toBe(true);
  }, 180_000);
});
