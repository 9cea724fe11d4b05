// Connections dropped at the worst moment: reset after a claim reached the server and
// before its reply came back, half-closed either way, and (issue 28, item 2) a takeover
// whose reply was lost and which the store sent again. Whatever the store does (resend,
// or StoreError and the caller calls again), the side effect runs once and the checker's
// invariants hold.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT } from '../helpers';
import { redisCommand, untilOneCommandSettle } from '../redis-server';
import { NETWORK, REDIS, Scene, scenesOfThisFile } from './scene';

const scene = scenesOfThisFile();

/** A new call's claim is the first request that names its key (Redis's SET NX GET, Postgres's Bind of the claim statement). */
const KEY = 'the-claimed-key';

/**
 * Once a request matching `match` has gone up, the reply that comes back for it is never
 * delivered: `fault` runs on the connection when its first bytes reach the proxy.
 */
function atReply(s: Scene, fault: (conn: any) => void, match?: string): Promise<void> {
  return new Promise((resolve) => {
    s.onNextRequest((conn) => {
      conn.onChunk('down', () => {
        if (conn.destroyed) return;
        fault(conn);
        resolve();
      });
    }, match);
  });
}

describe.each(NETWORK)('%s: connections dropped', (kind) => {
  it('a reset after the claim reached the server and before its reply: one run, every caller gets its result', async () => {
    const s = await scene(kind);
    const a = s.caller('a');
    const b = s.caller('b', { via: 'direct' });
    await a.call('warm-up');
    const cut = atReply(s, (conn) => conn.reset(), KEY);
    const got = await a.untilResult(KEY);
    await cut;
    const fromB = await b.call(KEY);
    const v = await s.verdict();
    expect(v.runs(KEY), v.text).toHaveLength(1);
    expect(got[got.length - 1], v.text).toEqual({ run: v.runs(KEY)[0] });
    expect(fromB).toEqual({ run: v.runs(KEY)[0] });
    expect(v.clean, v.text).toBe(true);
  });

  for (const dir of ['down', 'up'] as const) {
    it(`a connection half-closed ${dir === 'down' ? 'towards the client' : 'towards the server'} as the claim goes up: StoreError or the result, no hang, one run`, async () => {
      const s = await scene(kind);
      const a = s.caller('a');
      await a.call('warm-up');
      const closed = s.onNextRequest((conn) => conn.halfClose(dir), KEY);
      const got = await a.untilResult(KEY);
      await closed;
      for (const g of got.slice(0, -1)) expect(['STORE_ERROR', 'DUPLICATE_IN_FLIGHT']).toContain(g.error?.code);
      const v = await s.verdict({ hangBoundMs: 15_000 });
      expect(v.runs(KEY), v.text).toHaveLength(1);
      expect(got[got.length - 1], v.text).toEqual({ run: v.runs(KEY)[0] });
      expect(v.clean, v.text).toBe(true);
    });
  }
});

describe.each(REDIS)('%s: a takeover sent again', (kind) => {
  it('the reply to a takeover of a dead owner\'s claim is lost and the claim sent again: reconcile is asked, fn does not run again', async () => {
    const s = await scene(kind);
    // The claim script is loaded on the server (a fresh claim after a failure uses it), so
    // the first EVALSHA of A's takeover below is the takeover itself.
    let declined = 0;
    const w = s.caller('w', { decline: (key) => key === 'warm-up' && declined++ === 0 });
    await w.call('warm-up');
    expect((await w.call('warm-up')).run).toBeDefined();

    // A dead owner: it claimed `k`, its side effect happened, and it was killed.
    const owner = await s.owner('o', 'k', { leaseMs: 300 });
    await s.kill(owner.child, 'o');
    await s.leaseOver('k');

    const a = s.caller('a', { reconcile: true });
    const lost = atReply(s, (conn) => conn.reset(), 'EVALSHA');
    const got = await a.untilResult('k');
    await lost;
    const v = await s.verdict();
    expect(v.runs('k'), v.text).toEqual([owner.run]);
    expect(got[got.length - 1], v.text).toEqual({ run: owner.run });
    expect(v.clean, v.text).toBe(true);
  });
});

/**
 * Makes sure a new call's settle is applied by its first request, as the test below needs:
 * the reply it cuts must be that of an applied completion. On the loop transport ('redis')
 * one warm-up call did not always leave the store settling in one command (CI,
 * 2026-12-07): the completion below was then the IFEQ probe, answered "syntax error" and
 * not applied, and the test cut that reply. So: warm-up calls until one settles in one
 * command, then the settle scripts loaded straight on the server (a renewed claim settles
 * by settle.lua).
 */
async function settlesAtFirstRequest(s: Scene, a: { call: (key: string) => Promise<unknown> }): Promise<void> {
  if (s.kind === 'redis') await untilOneCommandSettle(s.server.port, (i) => a.call(`warm-up-${i}`));
  for (const name of ['settle', 'settle_if_equal']) {
    const code = readFileSync(join(ROOT, 'src', 'redis_store', 'lua', `${name}.lua`), 'utf8');
    const command = ['SCRIPT', 'LOAD', code].map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}`).join('\r\n');
    expect(await redisCommand(s.server.port, `*3\r\n${command}`)).toMatch(/^\$40\r\n[0-9a-f]{40}$/);
  }
}

describe.each(REDIS)('%s: a completion whose reply is lost', (kind) => {
  it('applied on the server, its reply lost and the server unreachable until the call gives up: the error does not say "not recorded"', async () => {
    const s = await scene(kind);
    let open!: () => void;
    let started!: (run: string) => void;
    const opened = new Promise<void>((r) => (open = r));
    const running = new Promise<string>((r) => (started = r));
    let warming = true;
    const a = s.caller('a', { leaseMs: 1000, onRun: (run) => !warming && started(run), work: () => (warming ? Promise.resolve() : opened) });
    await settlesAtFirstRequest(s, a); // so the cut reply below is the completion's own, applied
    warming = false;
    const call = a.call('k');
    const run = await running;
    // The completion's script goes up, is applied; its reply is dropped with the
    // connection, and no new connection gets through until the call has given up.
    const lost = atReply(s, (conn) => {
      s.proxy.refuse(true);
      conn.reset();
    }, `"run":"${run}"`); // the completion: the only request that carries the result
    open();
    const got = await call;
    await lost;
    s.proxy.refuse(false);
    const b = s.caller('b', { via: 'direct' });
    const v0 = await s.verdict();
    expect(await b.call('k')).toEqual({ run: v0.runs('k')[0] }); // it was recorded
    expect(got.error?.code, JSON.stringify(got)).toBe('STORE_ERROR');
    const v = await s.verdict();
    expect(v.clean, v.text).toBe(true);
  });
});
