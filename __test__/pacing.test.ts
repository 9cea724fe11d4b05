// A burst of store replies resumes over several turns of the event loop, never all in one:
// each turn lets calls go while its budget of time (0.5 ms) lasts, at least one.

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT } from './helpers';

const { pace } = require(join(ROOT, 'dist', 'core', 'pacing.js')) as typeof import('../dist/core/pacing.js');

/** A promise and its resolve (Promise.withResolvers is Node 22+). */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('pacing', () => {
  it('lets calls resume while the turn\'s budget lasts (calls of 0.1 ms: at most 6 a turn), in order, and all of them', async () => {
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    await new Promise((r) => setImmediate(r));

    const resumedIn: number[] = [];
    const order: number[] = [];
    // 64 replies that arrive together, as a group commit delivers them; each call goes
    // through pace() as idempotent.ts does (awaiting only when told to wait).
    const replies = Array.from({ length: 64 }, () => deferred());
    const calls = Promise.all(
      replies.map(async ({ promise }, i) => {
        await promise;
        const paced = pace();
        if (paced !== undefined) await paced;
        resumedIn.push(turn);
        order.push(i);
        // The continuation's own work, before its next await: 0.1 ms.
        for (const until = performance.now() + 0.1; performance.now() < until; );
      }),
    );
    for (const r of replies) r.resolve();
    await calls;
    ticking = false;

    const perTurn = new Map<number, number>();
    for (const t of resumedIn) perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
    // 0.5 ms / 0.1 ms, and the one that finds the budget spent... plus the first of a turn.
    expect(Math.max(...perTurn.values())).toBeLessThanOrEqual(6);
    expect(perTurn.size).toBeGreaterThanOrEqual(11);
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it('lets a burst of calls that cost next to nothing go in the turn it arrives', async () => {
    let turn = 0;
    const resumedIn: number[] = [];
    await new Promise((r) => setImmediate(r));
    setImmediate(() => turn++);
    const replies = Array.from({ length: 64 }, () => deferred());
    const calls = Promise.all(
      replies.map(async ({ promise }) => {
        await promise;
        const paced = pace();
        if (paced !== undefined) await paced;
        resumedIn.push(turn);
      }),
    );
    for (const r of replies) r.resolve();
    await calls;
    expect(new Set(resumedIn).size).toBe(1);
  });

  it('never holds back a call that resumes alone', async () => {
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setImmediate(r));
      expect(pace()).toBeUndefined();
    }
  });
});
