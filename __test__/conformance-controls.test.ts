// The conformance suite must fail stores that break the contract in the ways found from
// outside: a non-atomic acquire, a settle that races a takeover, a store whose handles
// share nothing. Each flawed store (fixtures/flawed-stores.ts) is run through the suite
// with a runner that collects outcomes; the test names what must fail. The same store
// without flaws passes everything, so each failure is the flaw's.

import { describe, expect, it } from 'vitest';

import { testing } from './helpers';
import { FlawedMemoryStore, type Flaws } from './fixtures/flawed-stores';

async function runSuite(flaws: Flaws, timeScale?: number): Promise<Map<string, string | null>> {
  const cases: Array<[string, () => Promise<void>]> = [];
  testing.storeConformance(
    { describe: (_name, body) => body(), it: (name, body) => cases.push([name, body]) },
    {
      name: 'flawed',
      makeStore: () => new FlawedMemoryStore(flaws),
      openSecondHandle: (store) => (store as FlawedMemoryStore).secondHandle(),
      timeScale,
    },
  );
  const outcomes = new Map<string, string | null>();
  for (const [name, body] of cases) {
    try {
      await body();
      outcomes.set(name, null);
    } catch (err) {
      outcomes.set(name, (err as Error).message);
    }
  }
  return outcomes;
}

const failed = (outcomes: Map<string, string | null>) => [...outcomes].filter(([, e]) => e !== null).map(([n]) => n);

describe('the conformance suite fails flawed stores', () => {
  it('the in-memory store without flaws passes every case (the control for the controls)', async () => {
    const outcomes = await runSuite({});
    expect(failed(outcomes)).toEqual([]);
    expect(outcomes.size).toBeGreaterThan(15);
  });

  it('acquire that reads, yields and writes: fails the atomic-acquire and concurrent-calls cases', async () => {
    const bad = failed(await runSuite({ racyAcquire: true }));
    expect(bad).toContain('acquire is atomic: concurrent acquires on one key, through two handles, have exactly one winner');
    expect(bad).toContain('ten concurrent calls on one key, through two handles, run fn once');
  });

  it('complete/fail that check the token, yield and write: fails the fencing-under-concurrency case', async () => {
    const bad = failed(await runSuite({ racySettle: true }));
    expect(bad).toContain('fencing under concurrency: a settle racing a takeover never succeeds alongside it');
  });

  it('a pending claim that expires ttlMs after it was made: fails the pending-never-expires case (issue 19)', async () => {
    const bad = failed(await runSuite({ pendingExpires: true }));
    expect(bad).toEqual(['a pending record never expires: past ttlMs with its lease dead it is taken over, never claimed as new']);
  });

  it('a turn of acquires sent as one batch and refused as a whole when one key cannot be kept: fails the refused-alone case (issue 36)', async () => {
    const bad = failed(await runSuite({ refusesTurn: true }));
    expect(bad).toEqual(['a call refused for its input fails alone: every other call of its turn runs once and returns its own result']);
  });

  it('handles that neither persist nor share: fails the second-handle cases', async () => {
    const bad = failed(await runSuite({ unshared: true }));
    expect(bad).toContain('a second handle on the same data sees the records: a call made through one replays through the other');
    expect(bad).toContain('acquire is atomic: concurrent acquires on one key, through two handles, have exactly one winner');
  });

  it('a missing openSecondHandle fails the two-handle cases with a message saying what to pass', async () => {
    const cases: Array<[string, () => Promise<void>]> = [];
    testing.storeConformance(
      { describe: (_n, body) => body(), it: (name, body) => cases.push([name, body]) },
      { name: 'no second handle', makeStore: () => new FlawedMemoryStore({}) } as never,
    );
    const [, body] = cases.find(([n]) => n.startsWith('a second handle'))!;
    await expect(body()).rejects.toThrow(/pass openSecondHandle/);
  });

  it('a correct store 30 ms away passes with timeScale 10, and fails the timed cases without it', async () => {
    expect(failed(await runSuite({ latencyMs: 30 }, 10))).toEqual([]);
    expect(failed(await runSuite({ latencyMs: 30 })).length).toBeGreaterThan(0);
  }, 300_000);
});
