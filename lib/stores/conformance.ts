/**
 * The store conformance suite: every row of the semantics table, run through
 * `idempotent()` against a real store. The built-in stores run it in this package's
 * tests; the author of a custom store runs it against theirs:
 *
 *   import { describe, it } from 'vitest';            // or node:test, or jest
 *   import { storeConformance } from 'idempotent-tools/testing';
 *   storeConformance({ describe, it }, {
 *     name: 'MyStore',
 *     makeStore: () => new MyStore({ db: freshDatabase() }),
 *     openSecondHandle: (store) => new MyStore({ db: store.db }),
 *   });
 *
 * `makeStore` must return a new, empty store each time (a new file, a new prefix).
 * `openSecondHandle(store)` must open another handle on the same data, as a second
 * process would (a new connection to the same file, server and prefix): the suite races
 * the two. Assertions use node:assert, so any runner's describe/it will do.
 */

import assert from 'node:assert/strict';

import { currentKey } from '../core/call-context.js';
import { step } from '../core/step.js';
import { DuplicateInFlightError, InFlightTimeoutError, KeyMismatchError, type LeaseLostError } from '../core/errors.js';
import { idempotent } from '../core/idempotent.js';
import type { IdempotencyRecord, Store } from '../core/store.js';


type Body = () => Promise<void>;
export interface Runner {
  describe: (name: string, body: () => void) => unknown;
  it: (name: string, body: Body, timeoutMs?: number) => unknown;
}

export interface ConformanceTarget {
  name: string;
  /** A new, empty store. */
  makeStore: () => Store | Promise<Store>;
  /** Another handle on `store`'s data, as another process would open it (not `store` itself). */
  openSecondHandle: (store: Store) => Store | Promise<Store>;
  /**
   * Multiplies every lease, TTL and wait the suite uses. Default 1 (leases of 30 ms, TTLs
   * of 40 ms): right for an embedded store; a store 30 ms away needs 10 or more.
   */
  timeScale?: number;
}

/** A promise and the functions that settle it: a gate a test opens when it chooses. */
function gate<T = void>() {
  let open!: (value: T) => void;
  let fail!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    open = res;
    fail = rej;
  });
  return { promise, open, fail };
}

/** Resolves once the wall clock has passed `epochMs` (for TTL and lease expiry). */
async function clockPast(epochMs: number): Promise<void> {
  while (Date.now() <= epochMs) {
    await new Promise((r) => setTimeout(r, Math.max(1, epochMs - Date.now() + 1)));
  }
}

export function storeConformance(runner: Runner, target: ConformanceTarget): void {
  const { describe, it } = runner;
  const scale = target.timeScale ?? 1;
  if (typeof scale !== 'number' || !Number.isFinite(scale) || scale <= 0) {
    throw new RangeError('storeConformance: timeScale must be a finite number > 0');
  }
  const ms = (n: number) => Math.ceil(n * scale);
  const withStore = (body: (store: Store) => Promise<void>): Body => async () => {
    const store = await target.makeStore();
    try {
      await body(store);
    } finally {
      await store.close();
    }
  };
  /** The store and a second handle on its data. */
  const withTwoHandles = (body: (a: Store, b: Store) => Promise<void>): Body => async () => {
    if (typeof target.openSecondHandle !== 'function') {
      throw new TypeError('storeConformance: pass openSecondHandle(store), a second handle on the same data: without it the suite cannot check that records are shared');
    }
    const a = await target.makeStore();
    let b: Store | undefined;
    try {
      b = await target.openSecondHandle(a);
      assert.notEqual(b, a, 'openSecondHandle must open a new handle, not return the same store object');
      await body(a, b);
    } finally {
      await b?.close();
      await a.close();
    }
  };

  describe(`store conformance: ${target.name}`, () => {
    it('a new key runs fn once, stores the result as completed, and returns it', withStore(async (store) => {
      let runs = 0;
      const charge = idempotent(async function charge(order: string, cents: number) {
        runs++;
        return { id: `ch_${runs}`, order, cents };
      }, { store });
      assert.deepEqual(await charge('o-1', 500), { id: 'ch_1', order: 'o-1', cents: 500 });
      const record = await store.get(charge.keyFor('o-1', 500));
      assert.equal(record?.status, 'completed');
      assert.equal(record?.attempts, 1);
      assert.equal(record?.name, 'charge');
      assert.deepEqual(record?.result, { id: 'ch_1', order: 'o-1', cents: 500 });
      assert.equal(runs, 1);
    }));

    it('a completed key returns a fresh copy of the stored result and does not run fn', withStore(async (store) => {
      let runs = 0;
      const charge = idempotent(async function charge(order: string) {
        runs++;
        return { order, tags: ['a'] };
      }, { store });
      await charge('o-2');
      const replayed = await charge('o-2');
      replayed.tags.push('mutated');
      assert.deepEqual(await charge('o-2'), { order: 'o-2', tags: ['a'] });
      assert.equal(runs, 1);
    }));

    it('sync functions, undefined results and falsy results are kept and replayed', withStore(async (store) => {
      let runs = 0;
      const values: unknown[] = [undefined, null, 0, '', false];
      const pick = idempotent(function pick(i: number) {
        runs++;
        return values[i];
      }, { store });
      for (let i = 0; i < values.length; i++) {
        assert.equal(await pick(i), values[i]);
        assert.equal(await pick(i), values[i]);
      }
      assert.equal(runs, values.length);
    }));

    it('a record past ttlMs counts as never seen: fn runs again', withStore(async (store) => {
      let runs = 0;
      const send = idempotent(async function send(to: string) {
        return `${to}#${++runs}`;
      }, { store, ttlMs: ms(40) });
      assert.equal(await send('ada'), 'ada#1');
      assert.equal(await send('ada'), 'ada#1');
      const record = await store.get(send.keyFor('ada'));
      assert.ok(record?.expiresAt);
      await clockPast(record.expiresAt);
      assert.equal(await send('ada'), 'ada#2');
      assert.equal(runs, 2);
    }));

    it('a pending record never expires: past ttlMs with its lease dead it is taken over, never claimed as new', withStore(async (store) => {
      const key = 'conformance-pending-ttl';
      const ttlMs = ms(20);
      const first = await store.acquire({ key, name: 'charge', fingerprint: 'fp', leaseMs: ms(30), ttlMs, force: false });
      assert.ok(first.acquired);
      assert.equal((await store.get(key))?.expiresAt, null, 'a pending claim carries no expiry: ttlMs counts from the settle');
      await clockPast(Date.now() + ms(60)); // past the ttl and the lease: the owner "died"
      assert.equal((await store.get(key))?.status, 'pending', 'a dead owner\'s claim is still there');
      const next = await store.acquire({ key, name: 'charge', fingerprint: 'fp', leaseMs: ms(1000), ttlMs, force: false });
      assert.ok(next.acquired);
      assert.deepEqual([next.attempts, next.takenOver], [2, true], 'taken over (reconcile is asked), not a fresh claim');
      // A long ttl here, so that the read below comes well before the record expires.
      assert.equal(await store.complete({ key, token: next.token, resultJson: '1', ttlMs: 3_600_000 }), true);
      const settled = await store.get(key);
      assert.equal(settled!.expiresAt! - settled!.updatedAt, 3_600_000, 'ttlMs counts from the settle');
    }));

    it("a step's record expires with its call: once the call completes, at the call record's expiresAt; a new call after it runs the step again", withStore(async (store) => {
      let charged = 0;
      let runs = 0;
      const order = idempotent(async function order(id: string) {
        runs++;
        const charge = await step('charge', async () => `ch_${++charged}`);
        return { id, charge };
      }, { store, ttlMs: ms(200) });
      assert.deepEqual(await order('o-s1'), { id: 'o-s1', charge: 'ch_1' });
      const call = (await store.get(order.keyFor('o-s1')))!;
      const [stepRecord] = await stepsOf(store, 'order');
      assert.equal(stepRecord?.status, 'completed');
      if (store.expireSettled === undefined) return; // optional: without it, steps are kept
      assert.equal(stepRecord.expiresAt, call.expiresAt, 'the step expires exactly when its call does');
      await clockPast(call.expiresAt!);
      assert.equal(await store.get(stepRecord.key), null, 'expired with its call');
      assert.deepEqual(await order('o-s1'), { id: 'o-s1', charge: 'ch_2' }, 'a new call after expiry does the step again');
      assert.deepEqual([runs, charged], [2, 2]);
    }));

    it("a step of an unfinished call is kept past the call's ttlMs: the call's next run replays it", withStore(async (store) => {
      let charged = 0;
      let runs = 0;
      const order = idempotent(async function order(id: string) {
        runs++;
        const charge = await step('charge', async () => `ch_${++charged}`);
        if (runs === 1) throw new Error('the email provider is down'); // the call fails after its step
        return { id, charge };
      }, { store, ttlMs: ms(40) });
      await assert.rejects(order('o-s2'), /email provider is down/);
      const [kept] = await stepsOf(store, 'order');
      assert.equal(kept?.expiresAt, null, 'a step of an unfinished call has no expiry');
      await clockPast(Date.now() + ms(120)); // three times the ttl
      assert.equal((await store.get(kept.key))?.status, 'completed');
      assert.deepEqual(await order('o-s2'), { id: 'o-s2', charge: 'ch_1' }, 'the retry replays the step');
      assert.deepEqual([runs, charged], [2, 1]);
      if (store.expireSettled === undefined) return;
      assert.equal((await store.get(kept.key))?.expiresAt, (await store.get(order.keyFor('o-s2')))?.expiresAt, 'completed now: it expires with the call');
    }));

    it('when fn throws: the error reaches the caller unchanged, the record is failed, and the next call runs', withStore(async (store) => {
      let runs = 0;
      class PaymentDeclined extends Error {
        override name = 'PaymentDeclined';
      }
      const thrown = new PaymentDeclined('card declined');
      const charge = idempotent(async function charge(order: string) {
        runs++;
        if (runs === 1) throw thrown;
        return `charged ${order}`;
      }, { store });
      await assert.rejects(charge('o-3'), (err) => err === thrown);
      const failed = await store.get(charge.keyFor('o-3'));
      assert.equal(failed?.status, 'failed');
      assert.deepEqual(failed?.error, { name: 'PaymentDeclined', message: 'card declined' });
      assert.equal(await charge('o-3'), 'charged o-3');
      assert.equal(runs, 2);
      assert.equal((await store.get(charge.keyFor('o-3')))?.attempts, 2);
    }));

    it('a result that is not JSON data: completed, TypeError now and on every replay, never rerun', withStore(async (store) => {
      let runs = 0;
      const open = idempotent(async function open() {
        runs++;
        return { handle: () => 'socket' };
      }, { store });
      await assert.rejects(open(), (err: Error) => err instanceof TypeError && /result\.handle is a function/.test(err.message));
      assert.equal((await store.get(open.keyFor()))?.status, 'completed');
      await assert.rejects(open(), TypeError);
      assert.equal(runs, 1);
    }));

    it('a result a replay would give back as another value (a Date): completed, refused now and on every replay with how to return it; its ISO string replays as itself', withStore(async (store) => {
      let runs = 0;
      const book = idempotent(async function book(when: string) {
        runs++;
        return { when: new Date(when), seats: 2 };
      }, { store });
      const refused = (err: unknown) =>
        err instanceof TypeError &&
        (err as { code?: unknown }).code === 'UNSTORABLE_RESULT' &&
        /result\.when is a Date.*toISOString\(\)/s.test((err as Error).message);
      await assert.rejects(book.withKey('booking-7')('2026-12-24T18:00:00.000Z'), refused);
      assert.equal((await store.get('booking-7'))?.status, 'completed', 'the side effect happened: the record says so');
      await assert.rejects(book.withKey('booking-7')('2026-12-24T18:00:00.000Z'), (err: Error) => refused(err) && (err as { key?: unknown }).key === 'booking-7');
      assert.equal(runs, 1);
      // Returned as the string the Date would be: the same value on the first call and the replay.
      const bookIso = idempotent(async function bookIso(when: string) {
        runs++;
        return { when: new Date(when).toISOString(), seats: 2 };
      }, { store });
      const first = await bookIso('2026-12-24T18:00:00.000Z');
      assert.deepEqual(await bookIso('2026-12-24T18:00:00.000Z'), first);
      assert.equal(runs, 2);
    }));

    it('a call refused for its input fails alone: every other call of its turn runs once and returns its own result', async () => {
      // A store may send the calls of one turn of the event loop together (a batch, a
      // pipeline); a call it cannot take must still fail alone, with its TypeError: one
      // client's bad key never fails another account's call. Each input on a store just
      // made (the turn that opens it) and again once it is in use.
      for (const bad of REFUSABLE_CALLS) {
        const store = await target.makeStore();
        try {
          const runs = new Map<number, number>();
          const op = idempotent(async function op(n: number) {
            runs.set(n, (runs.get(n) ?? 0) + 1);
            return { n };
          }, { store });
          const named = idempotent(async (n: number) => ({ n }), { store, name: `op-${HALF_EMOJI}` });
          for (const turn of [1, 2]) {
            const at = 31; // of 64
            const calls = Array.from({ length: 64 }, (_, i) => {
              const n = turn * 1000 + i;
              if (i === at) return (async () => bad.call({ op, named, n }))(); // withKey refuses some keys at once
              return i % 2 ? op.withKey(`turn-${turn}-${i}`)(n) : op(n); // business keys and derived ones
            });
            const settled = await Promise.allSettled(calls);
            const how = `${bad.what}, turn ${turn}`;
            settled.forEach((s, i) => {
              if (i === at) return;
              const n = turn * 1000 + i;
              assert.equal(s.status, 'fulfilled', `${how}: call ${i} failed with the refused one: ${s.status === 'rejected' ? (s.reason as Error)?.message : ''}`);
              assert.deepEqual((s as PromiseFulfilledResult<unknown>).value, { n }, `${how}: call ${i} returned another call's result`);
              assert.equal(runs.get(n), 1, `${how}: call ${i} ran ${runs.get(n) ?? 0} times`);
            });
            const own = settled[at]!;
            if (own.status === 'rejected') {
              const err = own.reason as Error;
              assert.ok(err instanceof TypeError, `${how}: refused with ${err?.name} (${err?.message}), not a TypeError`);
              assert.match(err.message, bad.refused, `${how}: the TypeError does not name what is wrong`);
            } else {
              // A store may keep what another cannot (lone surrogates and U+0000 are
              // strings like any other in memory): then kept exactly, as its own record.
              assert.ok(bad.kept !== undefined, `${how}: not refused (every store refuses it)`);
              assert.deepEqual(own.value, { n: turn * 1000 + at }, `${how}: kept, yet its result is not its own`);
              assert.equal((await store.get(bad.kept))?.key, bad.kept, `${how}: kept, yet not under its exact key`);
              await store.clear(bad.kept); // the next turn calls it again, as new
            }
          }
        } finally {
          await store.close();
        }
      }
    });

    it('the settles of one turn: a result the store cannot keep and texts with lone surrogates settle alone, and every other call is recorded', withStore(async (store) => {
      const release = gate();
      const runs = new Map<number, number>();
      const text = `half ${HALF_EMOJI} and nul \0`;
      const op = idempotent(async function op(n: number) {
        runs.set(n, (runs.get(n) ?? 0) + 1);
        await release.promise; // every call returns in the same turn: their settles go together
        if (n === 10) return { handle: 10n }; // completed, but its result cannot be stored
        if (n === 20) throw new Error(`declined: ${text}`);
        if (n === 30) return text;
        return { n };
      }, { store });
      const calls = Array.from({ length: 64 }, (_, n) => op(n));
      while (runs.size < 64) await new Promise((r) => setImmediate(r)); // every call claimed and running
      release.open();
      const settled = await Promise.allSettled(calls);
      const expect = (n: number) => (n === 30 ? text : { n });
      settled.forEach((s, n) => {
        if (n === 10) {
          assert.ok(s.status === 'rejected' && s.reason instanceof TypeError && /cannot be stored/.test(s.reason.message), `call 10: ${String((s as PromiseRejectedResult).reason)}`);
        } else if (n === 20) {
          assert.ok(s.status === 'rejected' && (s.reason as Error).message === `declined: ${text}`, 'call 20: not its own error');
        } else {
          assert.equal(s.status, 'fulfilled', `call ${n} failed: ${s.status === 'rejected' ? (s.reason as Error)?.message : ''}`);
          assert.deepEqual((s as PromiseFulfilledResult<unknown>).value, expect(n));
        }
      });
      assert.equal((await store.get(op.keyFor(10)))?.status, 'completed');
      assert.deepEqual((await store.get(op.keyFor(20)))?.error, { name: 'Error', message: `declined: ${text}` }, 'the error text is kept exactly');
      for (let n = 0; n < 64; n++) {
        if (n === 10 || n === 20) continue;
        assert.deepEqual(await op(n), expect(n), `call ${n} replays its own result`);
      }
      await assert.rejects(op(20), /declined/); // a failed call runs again
      assert.deepEqual([...runs].filter(([, r]) => r !== 1), [[20, 2]], 'every other call ran once');
    }));

    it("'raise': a call whose key is in flight throws DuplicateInFlightError at once", withStore(async (store) => {
      let runs = 0;
      const release = gate();
      const slow = idempotent(async function slow(n: number) {
        runs++;
        await release.promise;
        return n * 2;
      }, { store });
      const first = slow(21);
      await waitUntilPending(store, slow.keyFor(21));
      await assert.rejects(slow(21), (err: Error) => err instanceof DuplicateInFlightError && (err as DuplicateInFlightError).code === 'DUPLICATE_IN_FLIGHT');
      release.open();
      assert.equal(await first, 42);
      assert.equal(runs, 1);
    }));

    it("'block': waits for the in-flight call and returns its result, woken as soon as it finishes", withStore(async (store) => {
      let runs = 0;
      const release = gate();
      // A poll interval far longer than the test's timeout: only the in-process wake-up can finish it.
      const slow = idempotent(async function slow(n: number) {
        runs++;
        await release.promise;
        return { n };
      }, { store, onDuplicate: 'block', pollIntervalMs: 600_000, pollTimeoutMs: 600_000 });
      const first = slow(1);
      await waitUntilPending(store, slow.keyFor(1));
      const second = slow(1);
      release.open();
      assert.deepEqual(await second, { n: 1 });
      assert.deepEqual(await first, { n: 1 });
      assert.equal(runs, 1);
    }));

    it("'block': when the in-flight call fails, the waiter runs fn itself", withStore(async (store) => {
      let runs = 0;
      const release = gate();
      const flaky = idempotent(async function flaky() {
        runs++;
        if (runs === 1) {
          await release.promise;
          throw new Error('first attempt failed');
        }
        return 'second attempt';
      }, { store, onDuplicate: 'block', pollIntervalMs: 600_000 });
      const first = flaky();
      await waitUntilPending(store, flaky.keyFor());
      const second = flaky();
      release.open();
      await assert.rejects(first, /first attempt failed/);
      assert.equal(await second, 'second attempt');
      assert.equal(runs, 2);
    }));

    it("'block': past pollTimeoutMs, InFlightTimeoutError", withStore(async (store) => {
      const release = gate();
      const slow = idempotent(async function slow() {
        await release.promise;
        return 1;
      }, { store, onDuplicate: 'block', pollIntervalMs: ms(10), pollTimeoutMs: ms(50) });
      const first = slow();
      await waitUntilPending(store, slow.keyFor());
      await assert.rejects(slow(), (err: Error) => err instanceof InFlightTimeoutError && (err as InFlightTimeoutError).code === 'IN_FLIGHT_TIMEOUT');
      release.open();
      assert.equal(await first, 1);
    }));

    it("'retry': runs again at once; the retry's result is the stored one; the first owner's completion is refused and its caller gets LeaseLostError", withStore(async (store) => {
      let runs = 0;
      const release = gate();
      const place = idempotent(async function place(order: string) {
        const mine = ++runs;
        if (mine === 1) await release.promise;
        return `${order}:${mine}`;
      }, { store, onDuplicate: 'retry' });
      const first = place('o-9');
      await waitUntilPending(store, place.keyFor('o-9'));
      assert.equal(await place('o-9'), 'o-9:2');
      release.open();
      // Its result was not recorded: its caller is told so, and gets what its run returned in error.result.
      await assert.rejects(first, (err: Error) => (err as LeaseLostError).code === 'LEASE_LOST' && (err as LeaseLostError).result === 'o-9:1');
      assert.equal(await place('o-9'), 'o-9:2');
      const record = await store.get(place.keyFor('o-9'));
      assert.equal(record?.result, 'o-9:2');
      assert.equal(record?.attempts, 2);
      assert.equal(runs, 2);
    }));

    it('a pending record whose lease ran out is taken over, counts the attempt, and fences out the old owner', withStore(async (store) => {
      const key = `lease-${Math.random()}`;
      const dead = await store.acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: ms(30), force: false });
      assert.ok(dead.acquired);
      const held = await store.acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: ms(30), force: false });
      assert.equal(held.acquired, false);
      const pending = await store.get(key);
      assert.equal(pending?.status, 'pending');
      await clockPast(pending!.leaseExpiresAt!);
      const taker = await store.acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: 60_000, force: false });
      assert.ok(taker.acquired);
      assert.equal(taker.takenOver, true);
      assert.equal(taker.attempts, 2);
      assert.equal(await store.complete({ key, token: dead.token, resultJson: '"stale"' }), false);
      assert.equal(await store.fail({ key, token: dead.token, error: { name: 'E', message: 'stale' } }), false);
      if (store.renew) assert.equal(await store.renew(key, dead.token, 60_000), false);
      assert.equal(await store.complete({ key, token: taker.token, resultJson: '"fresh"' }), true);
      assert.equal((await store.get(key))?.result, 'fresh');
      assert.equal(await store.complete({ key, token: taker.token, resultJson: '"again"' }), false);
    }));

    it('release (reconcile, the default): the stuck claim is taken over by the next call, which asks reconcile; the old owner is fenced', withStore(async (store) => {
      if (store.release === undefined) return; // optional: a store without release passes
      const charges: string[] = []; // the provider's record of what happened
      const stuck = gate();
      const asked: number[] = [];
      let runs = 0;
      const charge = idempotent(async function charge(order: string) {
        runs++;
        charges.push(order);
        if (runs === 1) await stuck.promise; // the owner hangs after its side effect
        return `charged ${order}`;
      }, {
        store,
        leaseMs: ms(60_000), // stuck for a minute unless released
        reconcile: async ({ args, attempts }) => {
          asked.push(attempts);
          return charges.includes(args[0]) ? { happened: true, result: `found ${args[0]}` } : { happened: false };
        },
      });
      const first = charge('o-r1');
      const key = charge.keyFor('o-r1');
      await waitUntilPending(store, key);
      await assert.rejects(charge('o-r1'), DuplicateInFlightError, 'held until released');
      assert.equal(await store.release(key), true);
      const released = await store.get(key);
      assert.equal(released?.status, 'pending', 'still pending: a claim nobody holds');
      assert.equal(await charge('o-r1'), 'found o-r1', 'the next call asks reconcile, which finds the charge');
      assert.deepEqual(asked, [2]);
      assert.equal(runs, 1, 'fn did not run again');
      const record = await store.get(key);
      assert.deepEqual([record?.status, record?.attempts, record?.result], ['completed', 2, 'found o-r1']);
      stuck.open();
      await assert.rejects(first, (err: Error) => (err as LeaseLostError).code === 'LEASE_LOST', 'the old owner is fenced');
      assert.equal((await store.get(key))?.result, 'found o-r1');
      assert.equal(await store.release(key), false, 'a completed record is not released');
      assert.equal(await store.release('conformance-no-such-key'), false);
    }));

    it('release with { reconcile: false }: the record becomes failed and the next call runs fn without asking reconcile', withStore(async (store) => {
      if (store.release === undefined) return; // optional: a store without release passes
      const stuck = gate();
      let asked = 0;
      let runs = 0;
      const charge = idempotent(async function charge(order: string) {
        const mine = ++runs;
        if (mine === 1) await stuck.promise;
        return `${order}:${mine}`;
      }, { store, leaseMs: ms(60_000), reconcile: async () => (asked++, { happened: false }) });
      const first = charge('o-r2');
      const key = charge.keyFor('o-r2');
      await waitUntilPending(store, key);
      assert.equal(await store.release(key, { reconcile: false }), true);
      const released = await store.get(key);
      assert.equal(released?.status, 'failed');
      assert.equal(released?.error?.name, 'Released');
      assert.equal(await charge('o-r2'), 'o-r2:2');
      assert.equal(asked, 0);
      assert.equal((await store.get(key))?.attempts, 2);
      stuck.open();
      await assert.rejects(first, (err: Error) => (err as LeaseLostError).code === 'LEASE_LOST');
      assert.equal((await store.get(key))?.result, 'o-r2:2');
    }));

    it('a live owner keeps its lease by renewal while fn outlasts leaseMs', withStore(async (store) => {
      let runs = 0;
      const release = gate();
      // Only the first run waits: a takeover (the bug this test looks for) then fails the
      // assertion below instead of hanging on the gate.
      const long = idempotent(async function long() {
        runs++;
        if (runs === 1) await release.promise;
        return 'done';
      }, { store, leaseMs: ms(250) });
      const first = long();
      const key = long.keyFor();
      await waitUntilPending(store, key);
      const until = Date.now() + ms(1000); // four leases
      while (Date.now() < until) {
        await assert.rejects(long(), DuplicateInFlightError);
        await new Promise((r) => setTimeout(r, 15));
      }
      release.open();
      assert.equal(await first, 'done');
      assert.equal(runs, 1);
      assert.equal((await store.get(key))?.attempts, 1);
    }));

    it('an explicit key reused with other arguments throws KeyMismatchError and runs nothing', withStore(async (store) => {
      let runs = 0;
      const charge = idempotent(async function charge(order: string, cents: number) {
        runs++;
        return cents;
      }, { store });
      const refund = idempotent(async function refund(order: string, cents: number) {
        runs++;
        return -cents;
      }, { store });
      assert.equal(await charge.withKey('charge-order-42')('o-42', 100), 100);
      assert.equal(await charge.withKey('charge-order-42')('o-42', 100), 100);
      await assert.rejects(charge.withKey('charge-order-42')('o-42', 999), (err: Error) => err instanceof KeyMismatchError && (err as KeyMismatchError).code === 'KEY_MISMATCH');
      await assert.rejects(refund.withKey('charge-order-42')('o-42', 100), KeyMismatchError);
      assert.equal(runs, 1);
      assert.equal((await store.get('charge-order-42'))?.key, 'charge-order-42');
    }));

    it('the key option stores under the string it returns; keyFor and currentKey agree', withStore(async (store) => {
      const seen: Array<string | undefined> = [];
      const send = idempotent(async function send(email: { id: string; to: string }) {
        seen.push(currentKey());
        return email.id;
      }, { store, key: (email) => `email-${email.id}` });
      assert.equal(send.keyFor({ id: '7', to: 'ada' }), 'email-7');
      assert.equal(await send({ id: '7', to: 'ada' }), '7');
      assert.deepEqual(seen, ['email-7']);
      assert.equal(currentKey(), undefined);
      assert.equal((await store.get('email-7'))?.status, 'completed');
    }));

    it('listRecords and clear see what the calls wrote', withStore(async (store) => {
      const op = idempotent(async function op(n: number) {
        return n;
      }, { store });
      await op(1);
      await op(2);
      assert.equal((await store.listRecords()).length, 2);
      assert.equal(await store.clear(op.keyFor(1)), 1);
      assert.equal(await store.get(op.keyFor(1)), null);
      assert.equal(await store.clear(), 1);
      assert.deepEqual(await store.listRecords(), []);
    }));

    it('a second handle on the same data sees the records: a call made through one replays through the other', withTwoHandles(async (a, b) => {
      let runs = 0;
      const make = (store: Store) => idempotent(async function place(order: string) {
        runs++;
        return { order, run: runs };
      }, { store });
      const viaA = make(a);
      const viaB = make(b);
      assert.deepEqual(await viaA('o-1'), { order: 'o-1', run: 1 });
      assert.deepEqual(await viaB('o-1'), { order: 'o-1', run: 1 });
      assert.equal((await b.get(viaA.keyFor('o-1')))?.status, 'completed');
      const claim = await a.acquire({ key: 'held-by-a', name: 'op', fingerprint: 'fp', leaseMs: ms(60_000), force: false });
      assert.ok(claim.acquired);
      const other = await b.acquire({ key: 'held-by-a', name: 'op', fingerprint: 'fp', leaseMs: ms(60_000), force: false });
      assert.equal(other.acquired, false, 'a claim made through one handle must hold against the other');
      assert.equal(runs, 1);
    }));

    it('acquire is atomic: concurrent acquires on one key, through two handles, have exactly one winner', withTwoHandles(async (a, b) => {
      for (let round = 0; round < 5; round++) {
        const key = `race-${round}-${Math.random()}`;
        const claims = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? b : a).acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: ms(60_000), force: false })),
        );
        assert.equal(claims.filter((c) => c.acquired).length, 1, `round ${round}: ${claims.filter((c) => c.acquired).length} concurrent acquires won`);
      }
    }));

    it('ten concurrent calls on one key, through two handles, run fn once', withTwoHandles(async (a, b) => {
      let runs = 0;
      const make = (store: Store) => idempotent(async function once(n: number) {
        runs++;
        await new Promise((r) => setImmediate(r));
        return n;
      }, { store, onDuplicate: 'block', pollIntervalMs: ms(5), pollTimeoutMs: ms(60_000) });
      const viaA = make(a);
      const viaB = make(b);
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? viaB : viaA)(7)));
      assert.deepEqual(results, Array(10).fill(7));
      assert.equal(runs, 1);
    }));

    it('fencing under concurrency: a settle racing a takeover never succeeds alongside it', withTwoHandles(async (a, b) => {
      // Every interleaving a store might allow: the settle sent first or second, after 0 to
      // 3 turns of the event loop. If both the old owner's settle and the new claim report
      // success, the settle wrote over a record that was no longer its own.
      let round = 0;
      for (const op of ['complete', 'fail'] as const) {
        for (const settleFirst of [true, false]) {
          for (let turns = 0; turns < 4; turns++) {
            const key = `fence-${round++}-${Math.random()}`;
            const old = await a.acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: ms(60_000), force: false });
            assert.ok(old.acquired);
            const later = async <T>(f: () => Promise<T>, n: number) => {
              for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
              return f();
            };
            const settle = () => op === 'complete'
              ? a.complete({ key, token: old.token, resultJson: '"old"' })
              : a.fail({ key, token: old.token, error: { name: 'E', message: 'old' } });
            const takeover = () => b.acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: ms(60_000), force: true });
            const [settled, claim] = settleFirst
              ? await Promise.all([settle(), later(takeover, turns)])
              : await Promise.all([later(settle, turns), takeover()]).then(([s, c]) => [s, c] as const);
            const how = `${op} by the old owner ${settleFirst ? 'sent before' : 'sent after'} a takeover, ${turns} turns apart`;
            // A completed record cannot be claimed, so a complete and a takeover cannot both
            // succeed (a failed record can: fail, then claim, is a valid order).
            if (op === 'complete') assert.ok(!(settled && claim.acquired), `${how}: both succeeded`);
            if (claim.acquired) {
              assert.equal(await a.complete({ key, token: old.token, resultJson: '"stale"' }), false, `${how}: the old token still settles`);
              assert.equal(await b.complete({ key, token: claim.token, resultJson: '"new"' }), true, `${how}: the new owner's claim was overwritten`);
              assert.equal((await a.get(key))?.result, 'new');
            } else {
              assert.equal((await b.get(key))?.status, 'completed', `${how}: the takeover was refused, yet the record is not completed`);
            }
          }
        }
      }
    }));
  });
}

/** Half of an emoji (U+1F642 cut after its first UTF-16 unit): a lone surrogate, as a key cut to a length in code units has. */
const HALF_EMOJI = '\u{1F642}'.slice(0, 1);

/** Wrappers a refusable call may use: `op(n)` returns `{ n }`; `named` is the same, under a name cut in the middle of an emoji. */
interface Wrappers {
  op: ((n: number) => Promise<unknown>) & { withKey(key: string): (n: number) => Promise<unknown> };
  named: ((n: number) => Promise<unknown>) & { withKey(key: string): (n: number) => Promise<unknown> };
  n: number;
}

/**
 * Calls with input a store refuses (or, where `kept` names the key, may keep exactly
 * instead): the kinds of input refused per call, whatever the store.
 */
const REFUSABLE_CALLS: Array<{ what: string; call: (w: Wrappers) => Promise<unknown>; refused: RegExp; kept?: string }> = [
  { what: 'a business key cut in the middle of an emoji', call: ({ op, n }) => op.withKey(`order-${HALF_EMOJI}`)(n), refused: /the key .*lone UTF-16 surrogate/, kept: `order-${HALF_EMOJI}` },
  { what: 'a name cut in the middle of an emoji, under a business key', call: ({ named, n }) => named.withKey('named-order')(n), refused: /the name .*lone UTF-16 surrogate/, kept: 'named-order' },
  { what: 'a name cut in the middle of an emoji, under a derived key', call: ({ named, n }) => named(n), refused: /the name .*lone UTF-16 surrogate/ },
  { what: 'a key with U+0000', call: ({ op, n }) => op.withKey('order-\0')(n), refused: /U\+0000/, kept: 'order-\0' },
  { what: "a key reserved for the package's own records", call: ({ op, n }) => op.withKey('idempotent-tools:key-id-secret')(n), refused: /is reserved/ },
  { what: 'a key over maxKeyBytes', call: ({ op, n }) => op.withKey('k'.repeat(4096))(n), refused: /maxKeyBytes/ },
  { what: 'arguments that are not JSON data', call: ({ op, n }) => op(BigInt(n) as never), refused: /BigInt/ },
];

/** The records of `name`'s steps (their names are `name.step("label")`). */
async function stepsOf(store: Store, name: string): Promise<IdempotencyRecord[]> {
  return (await store.listRecords()).filter((r) => r.name.startsWith(`${name}.step(`));
}

/** Waits until the key's record is pending (the owner's claim is committed). */
async function waitUntilPending(store: Store, key: string): Promise<void> {
  for (;;) {
    const record = await store.get(key);
    if (record?.status === 'pending') return;
    await new Promise((r) => setImmediate(r));
  }
}
