// A burst of store replies resumes over several turns of the event loop, never all in one.

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT } from './helpers';

const { pace } = require(join(ROOT, 'dist', 'core', 'pacing.js')) as typeof import('../dist/core/pacing.js');

describe('pacing', () => {
  it('lets 8 calls resume per turn of the loop, in order, and all of them', async () => {
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
    // 64 replies that arrive together, as a group commit delivers them.
    await Promise.all(
      Array.from({ length: 64 }, async (_, i) => {
        await pace();
        resumedIn.push(turn);
        order.push(i);
      }),
    );
    ticking = false;

    const perTurn = new Map<number, number>();
    for (const t of resumedIn) perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
    expect(Math.max(...perTurn.values())).toBeLessThanOrEqual(8);
    expect(perTurn.size).toBeGreaterThanOrEqual(8);
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it('never holds back a call that resumes alone', async () => {
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setImmediate(r));
      expect(pace()).toBeUndefined();
    }
  });
});
