// A call a store refuses fails alone (issue 36, finding 5; SPEC: "A call that is refused, on
// any store and in any batch, fails alone"). The native stores send the calls of one turn of
// the event loop to Rust together (SQLite's and Postgres's batches, Redis's one string per
// turn): here each store is called directly, as a store of one's own or the CLI calls it,
// with 64 calls in one turn of which exactly one carries input the store cannot take. That
// one is refused with a TypeError naming what is wrong; every other call of the turn is
// answered as if it had been alone. (Through idempotent(), the conformance suite's "a call
// refused for its input fails alone" case.)

import { join } from 'node:path';
import { Pool } from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';
import { eachStore } from './stores';

const { idempotentTx } = require(join(ROOT, 'dist', 'pg.js')) as typeof import('../dist/pg.js');

const redis = await sharedRedis();
afterAll(() => redis.stop());
afterAll(() => dropTables());

/** Half of an emoji: a lone UTF-16 surrogate, as a string cut to a length in code units has. */
const HALF = '\u{1F642}'.slice(0, 1);

type Kind = 'acquire' | 'complete' | 'fail' | 'renew';
type AnyStore = ReturnType<ReturnType<typeof eachStore>[number][1]>[number];
/** Which stores refuse an input: every native store, or PostgreSQL alone (its text cannot hold U+0000, its index long keys). */
type RefusedBy = 'native' | 'postgres';

interface Bad {
  what: string;
  kind: Kind;
  /** The refused call's request, made from a good one (for acquire: the request; otherwise: key, token and the rest). */
  change: Record<string, unknown>;
  refused: RegExp;
  by: RefusedBy;
}

const BAD: Bad[] = [
  // acquire
  { kind: 'acquire', what: 'a key cut in the middle of an emoji', change: { key: `order-${HALF}` }, refused: /the key .*lone UTF-16 surrogate/, by: 'native' },
  { kind: 'acquire', what: 'a name cut in the middle of an emoji', change: { name: `op-${HALF}` }, refused: /the name .*lone UTF-16 surrogate/, by: 'native' },
  { kind: 'acquire', what: 'a fingerprint with a lone surrogate', change: { fingerprint: `fp-${HALF}` }, refused: /the fingerprint .*lone UTF-16 surrogate/, by: 'native' },
  { kind: 'acquire', what: 'a key that is not a string', change: { key: 42 }, refused: /"key" must be a string, not number/, by: 'native' },
  { kind: 'acquire', what: 'no name', change: { name: undefined }, refused: /"name" must be a string, not undefined/, by: 'native' },
  { kind: 'acquire', what: 'a leaseMs that is not a number', change: { leaseMs: '60000' }, refused: /"leaseMs" must be a number, not string/, by: 'native' },
  { kind: 'acquire', what: 'a force that is not true or false', change: { force: 1 }, refused: /"force" must be true or false, not number/, by: 'native' },
  { kind: 'acquire', what: 'a ttlMs that is not a number', change: { ttlMs: '5' }, refused: /"ttlMs" must be a number or absent, not string/, by: 'native' },
  { kind: 'acquire', what: 'meta that is not JSON data', change: { meta: { n: 1n } }, refused: /"meta" .*JSON/, by: 'native' },
  { kind: 'acquire', what: 'a key with U+0000', change: { key: 'order-\0' }, refused: /key .*U\+0000/, by: 'postgres' },
  { kind: 'acquire', what: 'a name with U+0000', change: { name: 'op-\0' }, refused: /name .*U\+0000/, by: 'postgres' },
  { kind: 'acquire', what: 'a fingerprint with U+0000', change: { fingerprint: 'fp-\0' }, refused: /fingerprint .*U\+0000/, by: 'postgres' },
  { kind: 'acquire', what: "a key over the index's 2,048 bytes", change: { key: 'k'.repeat(3000) }, refused: /at most 2048 bytes/, by: 'postgres' },
  // complete and fail
  ...(['complete', 'fail'] as const).flatMap((kind): Bad[] => [
    { kind, what: 'a key cut in the middle of an emoji', change: { key: `order-${HALF}` }, refused: /the key .*lone UTF-16 surrogate/, by: 'native' },
    { kind, what: 'a token with a lone surrogate', change: { token: `t-${HALF}` }, refused: /token .*lone UTF-16 surrogate/, by: 'native' },
    { kind, what: 'a token that is not a string', change: { token: null }, refused: /"token" must be a string, not null/, by: 'native' },
    { kind, what: 'a ttlMs that is not a number', change: { ttlMs: '5' }, refused: /"ttlMs" must be a number or absent, not string/, by: 'native' },
    { kind, what: 'a durationMs that is not a number', change: { durationMs: 'x' }, refused: /"durationMs" must be a number or absent, not string/, by: 'native' },
    { kind, what: 'a token with U+0000', change: { token: 't-\0' }, refused: /token .*U\+0000/, by: 'postgres' },
  ]),
  { kind: 'complete', what: 'result JSON text with a lone surrogate', change: { resultJson: `"${HALF}"` }, refused: /result .*lone UTF-16 surrogate/, by: 'native' },
  { kind: 'complete', what: 'result JSON text that is not a string', change: { resultJson: 42 }, refused: /"resultJson" must be a string or absent, not number/, by: 'native' },
  { kind: 'complete', what: 'result JSON text with U+0000 as it is', change: { resultJson: '"\0"' }, refused: /result .*U\+0000/, by: 'postgres' },
  { kind: 'fail', what: 'an error that is not { name, message }', change: { error: 'boom' }, refused: /"error" must be \{ name, message \} \(two strings\) or absent/, by: 'native' },
  // renew
  { kind: 'renew', what: 'a key cut in the middle of an emoji', change: { key: `order-${HALF}` }, refused: /the key .*lone UTF-16 surrogate/, by: 'native' },
  { kind: 'renew', what: 'a token with a lone surrogate', change: { token: `t-${HALF}` }, refused: /token .*lone UTF-16 surrogate/, by: 'native' },
  { kind: 'renew', what: 'a leaseMs that is not a number', change: { leaseMs: '1000' }, refused: /"leaseMs" must be a number, not string/, by: 'native' },
  { kind: 'renew', what: 'a key with U+0000', change: { key: 'order-\0' }, refused: /key .*U\+0000/, by: 'postgres' },
];

const refuses = (storeName: string, by: RefusedBy) => (by === 'postgres' ? storeName === 'PostgresStore' : storeName !== 'MemoryStore');

const acquireRequest = (key: string) => ({ key, name: 'op', fingerprint: 'fp', leaseMs: 60_000, force: false });

/** One call of `kind`, its request `change`d. */
function call(store: AnyStore, kind: Kind, key: string, token: string, i: number, change: Record<string, unknown> = {}): Promise<unknown> {
  if (kind === 'acquire') return store.acquire({ ...acquireRequest(key), ...change } as never);
  if (kind === 'renew') {
    const r = { key, token, leaseMs: 60_000, ...change };
    return store.renew!(r.key as string, r.token as string, r.leaseMs as number);
  }
  if (kind === 'complete') return store.complete({ key, token, resultJson: JSON.stringify({ i }), ttlMs: 60_000, ...change } as never);
  return store.fail({ key, token, error: { name: 'Declined', message: `call ${i}` }, ...change } as never);
}

/** Calls one turn's 64 calls (the refused one at `at`); every call's outcome. */
function oneTurn(make: (i: number) => Promise<unknown>): Promise<PromiseSettledResult<unknown>[]> {
  // Each call made in this one synchronous loop: the store's next crossing carries them all.
  return Promise.allSettled(Array.from({ length: 64 }, (_, i) => make(i)));
}

const AT = 31;

for (const [storeName, open] of eachStore(redis.url, uniquePrefix)) {
  describe(`${storeName}: one call refused among the 64 of its turn fails alone`, () => {
    for (const bad of BAD) {
      const expected = refuses(storeName, bad.by);
      it(`${bad.kind}, ${bad.what}: ${expected ? 'refused alone' : 'kept or not, the others answered'}`, async () => {
        const [store] = open(1);
        try {
          const keys = Array.from({ length: 64 }, (_, i) => `${bad.kind}-${i}`);
          let tokens: string[] = [];
          if (bad.kind !== 'acquire') {
            const claims = await Promise.all(keys.map((key) => store!.acquire(acquireRequest(key))));
            tokens = claims.map((c) => (c.acquired ? c.token : ''));
          }
          const outcomes = await oneTurn((i) => call(store!, bad.kind, keys[i]!, tokens[i]!, i, i === AT ? bad.change : {}));
          outcomes.forEach((o, i) => {
            if (i === AT) return;
            expect(o.status, `call ${i}: ${o.status === 'rejected' ? (o.reason as Error)?.message : ''}`).toBe('fulfilled');
            const value = (o as PromiseFulfilledResult<unknown>).value;
            if (bad.kind === 'acquire') expect(value).toMatchObject({ acquired: true });
            else expect(value, `call ${i}`).toBe(true);
          });
          const own = outcomes[AT]!;
          if (expected) {
            expect(own.status).toBe('rejected');
            const err = (own as PromiseRejectedResult).reason as Error;
            expect(err, err?.message).toBeInstanceOf(TypeError);
            expect(err.message).toMatch(bad.refused);
          }
          // Each other call did what it was sent to do, once.
          for (let i = 0; i < 64; i++) {
            if (i === AT) continue;
            const record = await store!.get(keys[i]!);
            if (bad.kind === 'complete') expect(record).toMatchObject({ status: 'completed', result: { i }, attempts: 1 });
            else if (bad.kind === 'fail') expect(record).toMatchObject({ status: 'failed', error: { name: 'Declined', message: `call ${i}` } });
            else expect(record).toMatchObject({ status: 'pending', attempts: 1 });
          }
          if (expected && bad.kind !== 'acquire') {
            // The refused call changed nothing: its claim is still there, and still its own.
            expect(await store!.get(keys[AT]!)).toMatchObject({ status: 'pending' });
            expect(await call(store!, bad.kind, keys[AT]!, tokens[AT]!, AT)).toBe(true);
          }
        } finally {
          await store!.close();
        }
      });
    }

    it('a turn of every kind of call at once (acquires, completes, fails, renewals) with one refused: the others are answered', async () => {
      const [store] = open(1);
      try {
        const held = await Promise.all(Array.from({ length: 48 }, (_, i) => store!.acquire(acquireRequest(`held-${i}`))));
        const token = (i: number) => (held[i]!.acquired ? (held[i] as { token: string }).token : '');
        const outcomes = await oneTurn((i) => {
          if (i === AT) return call(store!, 'acquire', 'refused', '', i, { fingerprint: `fp-${HALF}` });
          if (i < 16) return call(store!, 'acquire', `new-${i}`, '', i);
          if (i < 32) return call(store!, 'complete', `held-${i - 16}`, token(i - 16), i);
          if (i < 48) return call(store!, 'fail', `held-${i - 16}`, token(i - 16), i);
          return call(store!, 'renew', `held-${i - 16}`, token(i - 16), i);
        });
        outcomes.forEach((o, i) => {
          if (i === AT) return;
          expect(o.status, `call ${i}: ${o.status === 'rejected' ? (o.reason as Error)?.message : ''}`).toBe('fulfilled');
          expect((o as PromiseFulfilledResult<unknown>).value, `call ${i}`).toEqual(i < 16 ? expect.objectContaining({ acquired: true }) : true);
        });
        if (storeName !== 'MemoryStore') expect((outcomes[AT] as PromiseRejectedResult).reason).toBeInstanceOf(TypeError);
      } finally {
        await store!.close();
      }
    });
  });
}

describe('idempotentTx: one call refused among the 64 of its turn fails alone (its replays of a turn are one statement)', () => {
  for (const [what, key, refused] of [
    ['a key cut in the middle of an emoji', `order-${HALF}`, /the key .*lone UTF-16 surrogate/],
    ['a key with U+0000', 'order-\0', /key .*U\+0000/],
  ] as const) {
    it(what, async () => {
      const pool = new Pool({ connectionString: PG_URL, max: 8 });
      try {
        let runs = 0;
        const place = idempotentTx(async function place(client, n: number) {
          runs++;
          await client.query('SELECT 1');
          return { n };
        }, { pool, table: uniqueTable(), onDuplicate: 'block' });
        await place.withKey('first')(-1); // the table exists: each later call's first step is a replay read, batched per turn
        for (const round of ['new', 'replayed']) {
          const outcomes = await oneTurn((i) => (i === AT ? (async () => place.withKey(key)(i))() : place.withKey(`k-${i}`)(i)));
          outcomes.forEach((o, i) => {
            if (i === AT) return;
            expect(o.status, `${round}, call ${i}: ${o.status === 'rejected' ? (o.reason as Error)?.message : ''}`).toBe('fulfilled');
            expect((o as PromiseFulfilledResult<unknown>).value).toEqual({ n: i });
          });
          const err = (outcomes[AT] as PromiseRejectedResult).reason as Error;
          expect(err).toBeInstanceOf(TypeError);
          expect(err.message).toMatch(refused);
        }
        expect(runs).toBe(1 + 63);
      } finally {
        await pool.end();
      }
    });
  }
});
