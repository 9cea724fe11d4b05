// PostgresStore's backends terminated (pg_terminate_backend) while a call settles: its
// completion committed, and the reply never reached the client. When the record can be
// read back, the call gets its result. When it cannot either (new connections refused
// until the call gives up), the outcome is unknown: the error must say so, never that the
// result "could not be recorded" when it was (issue 28, item 5).

import { describe, expect, it } from 'vitest';

import { Scene, scenesOfThisFile } from './scene';

const scene = scenesOfThisFile();

/** Runs `k` on caller A until its completion's reply reaches the proxy; then `fault`. */
async function settleCutOff(s: Scene, fault: (conn: any) => Promise<void>) {
  let open!: () => void;
  let started!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  const running = new Promise<void>((r) => (started = r));
  const a = s.caller('a', { leaseMs: 1000, onRun: () => started(), work: () => opened });
  const call = a.call('k');
  await running;
  const completing = s.onNextRequest((conn) => conn.hold('down'));
  open();
  const conn = await completing;
  await s.nextReply(conn); // the completion committed: its reply is at the proxy, held
  await fault(conn);
  return call;
}

describe('postgres: backends terminated mid-settle', () => {
  it('the completion committed, its reply lost with every backend: read back, the caller gets its result', async () => {
    const s = await scene('postgres');
    const got = await settleCutOff(s, async (conn) => {
      expect(await s.terminate()).toBeGreaterThan(0);
      conn.reset();
    });
    const v = await s.verdict();
    expect(got, v.text).toEqual({ run: v.runs('k')[0] });
    expect(v.clean, v.text).toBe(true);
  });

  it('the completion committed, its reply lost, and no read-back possible: the error does not say "not recorded"', async () => {
    const s = await scene('postgres');
    const got = await settleCutOff(s, async (conn) => {
      s.proxy.refuse(true); // first: a client that reconnects at once must not get through
      expect(await s.terminate()).toBeGreaterThan(0);
      conn.reset();
    });
    s.proxy.refuse(false);
    const b = s.caller('b', { via: 'direct' });
    const v0 = await s.verdict();
    expect(await b.call('k')).toEqual({ run: v0.runs('k')[0] }); // it was recorded
    if (got.error === undefined) {
      // A connection the terminations missed still read the record back: the true result.
      expect(got).toEqual({ run: v0.runs('k')[0] });
    } else {
      expect(got.error.code, JSON.stringify(got)).toBe('STORE_ERROR');
      expect(got.error.message).toMatch(/whether its result was recorded is unknown/);
    }
    const v = await s.verdict();
    expect(v.clean, v.text).toBe(true);
  });
});
