import { describe, expect, it } from 'vitest';

import { lib, tempDb } from './helpers';

const { idempotent, SqliteStore, KeyMismatchError } = lib;

function wrap(options: Parameters<typeof idempotent>[1] = {}) {
  let runs = 0;
  const store = new SqliteStore({ path: tempDb() });
  const fn = idempotent(function tool(..._args: unknown[]) {
    runs++;
    return runs;
  }, { store, ...options });
  return { fn, store, runs: () => runs };
}

describe('derived keys are pinned', () => {
  it('a call derives the key it derived in earlier versions (else an upgrade would run finished calls again)', () => {
    // Computed by the release before canonicalArgsJson; any change to the encoding or the
    // hashing shows here.
    const fn = idempotent(function chargeCard(..._args: unknown[]) {
      return 1;
    }, { store: new SqliteStore({ path: tempDb() }) });
    const pinned: Array<[unknown[], string]> = [
      [[], '35c63ba10584fd60aec545229f2555e2adaba65ceb24c29e4d99a8be884f9a6f'],
      [[{ customer: 'cus_1', amount: 1000, currency: 'eur' }], '6c9cb1ee10d38675021e3d4c0defcf0ce3be29f668f1913b053982b858e15ad6'],
      [['x', 2, null, true, [1, { b: 2, a: 1 }], { z: { y: [] } }], 'c487bd64702d9a158c03736529547a451aed77936e43c6c72c523d25331d8d14'],
      [[new Date(0), undefined], '20b727f52bebead628db9f8f578f234226e76af3422e6ae93107b2fe23d07ecc'],
      [['\u00e9\ud83d\ude00'], 'edad03d96cd9a6ab208758c26b119476bf09616eda808c416d17e1c8d1fd0ed7'],
    ];
    for (const [args, key] of pinned) expect(fn.keyFor(...args)).toBe(key);
  });
});

describe('derived keys', () => {
  it('object key order does not matter, at any depth', () => {
    const { fn } = wrap();
    expect(fn.keyFor({ a: 1, b: { c: 2, d: [1, { e: 3, f: 4 }] } })).toBe(
      fn.keyFor({ b: { d: [1, { f: 4, e: 3 }], c: 2 }, a: 1 }),
    );
  });

  it('different values give different keys', () => {
    const { fn } = wrap();
    const keys = new Set(
      [[1], ['1'], [true], [null], [[]], [{}], [1, 2], [[1, 2]], [{ a: 1 }], [{ a: '1' }], ['a', 'b'], ['a,b'], [0.1], [1e21]].map(
        (args) => fn.keyFor(...args),
      ),
    );
    expect(keys.size).toBe(14);
  });

  it('the name and the context are part of the key', () => {
    const store = new SqliteStore({ path: tempDb() });
    const a = idempotent(function a(x: number) { return x; }, { store });
    const b = idempotent(function b(x: number) { return x; }, { store });
    const inThread = (thread: string) =>
      idempotent(function a(x: number) { return x; }, { store, context: () => ({ thread }) });
    expect(a.keyFor(1)).not.toBe(b.keyFor(1));
    expect(inThread('t1').keyFor(1)).not.toBe(inThread('t2').keyFor(1));
    expect(inThread('t1').keyFor(1)).not.toBe(a.keyFor(1));
    expect(a.keyFor(1)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('payload picks the identifying data; the rest of the arguments is ignored', async () => {
    const { fn, runs } = wrap({ payload: (order: unknown) => order });
    const client = { send: () => 'not data' };
    expect(await fn({ id: 1 }, client)).toBe(1);
    expect(await fn({ id: 1 }, { other: 'client' })).toBe(1);
    expect(runs()).toBe(1);
  });

  it('a Date takes part through toJSON; trailing undefined arguments and undefined fields are left out', () => {
    const { fn } = wrap();
    expect(fn.keyFor(new Date('2026-01-01T00:00:00Z'))).toBe(fn.keyFor('2026-01-01T00:00:00.000Z'));
    expect(fn.keyFor('a', undefined)).toBe(fn.keyFor('a'));
    expect(fn.keyFor({ a: 1, b: undefined })).toBe(fn.keyFor({ a: 1 }));
  });

  class Money {
    constructor(readonly cents: number) {}
  }
  const cycle: Record<string, unknown> = { id: 1 };
  cycle.self = cycle;
  const throwingGetter = Object.defineProperty({}, 'secret', { enumerable: true, get() { throw new Error('nope'); } });
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();

  const lossy: Array<[string, unknown[], string, RegExp]> = [
    ['a function', [{ cb: () => 1 }], 'args[0].cb', /function/],
    ['a symbol', ['x', Symbol('s')], 'args[1]', /symbol/],
    ['undefined inside an array', [[1, undefined]], 'args[0][1]', /undefined/],
    ['undefined in the middle of the arguments', [undefined, 1], 'args[0]', /undefined/],
    ['a hole in an array', [[1, , 3]], 'args[0][1]', /hole/], // eslint-disable-line no-sparse-arrays
    ['NaN', [{ n: NaN }], 'args[0].n', /NaN/],
    ['Infinity', [Infinity], 'args[0]', /Infinity/],
    ['-Infinity', [{ a: [-Infinity] }], 'args[0].a[0]', /Infinity/],
    ['a BigInt', [{ amount: 10n }], 'args[0].amount', /BigInt/],
    ['a Map', ['x', { tags: new Map() }], 'args[1].tags', /Map/],
    ['a Set', ['x', { tags: new Set([1]) }], 'args[1].tags', /Set/],
    ['a typed array', [new Uint8Array(2)], 'args[0]', /Uint8Array/],
    ['a class instance without toJSON', [{ price: new Money(5) }], 'args[0].price', /Money/],
    ['a cycle', [cycle], 'args[0].self', /cycle/],
    ['a toJSON that throws', [{ d: { toJSON() { throw new Error('bad date'); } } }], 'args[0].d', /toJSON\(\) threw.*bad date/],
    ['a getter that throws', [throwingGetter], 'args[0].secret', /nope/],
    ['a revoked proxy', [{ p: revoked.proxy }], 'args[0].p', /could not be read/],
    ['a symbol-keyed property', [{ [Symbol('k')]: 1 }], 'args[0]', /symbol key/],
    ['a key with odd characters', [{ 'a b': NaN }], 'args[0]["a b"]', /NaN/],
  ];

  for (const [kind, args, path, what] of lossy) {
    it(`refuses ${kind} with its path (${path}), and does not run`, async () => {
      const { fn, runs } = wrap();
      const err = await fn(...args).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TypeError);
      const message = (err as Error).message;
      expect(message).toContain(` ${path} is `);
      expect(message).toMatch(what);
      expect(message).toMatch(/withKey/);
      expect(runs()).toBe(0);
      expect(() => fn.keyFor(...args)).toThrow(TypeError);
    });
  }

  it('refuses deep nesting with a message, not a stack overflow', () => {
    const { fn } = wrap();
    let deep: unknown = 1;
    for (let i = 0; i < 5000; i++) deep = [deep];
    expect(() => fn.keyFor(deep)).toThrow(/nested more than/);
  });

  it('an explicit key works for arguments that are not data', async () => {
    const { fn, runs } = wrap();
    const socket = new Map([[1, 2]]);
    expect(await fn.withKey('with-a-map')(socket)).toBe(1);
    expect(await fn.withKey('with-a-map')(socket)).toBe(1);
    expect(runs()).toBe(1);
  });

  it('an explicit key reused for other arguments is a KeyMismatchError; the same arguments in another key order are not', async () => {
    const { fn, runs } = wrap();
    await fn.withKey('k')({ a: 1, b: 2 });
    expect(await fn.withKey('k')({ b: 2, a: 1 })).toBe(1);
    await expect(fn.withKey('k')({ a: 1, b: 3 })).rejects.toBeInstanceOf(KeyMismatchError);
    expect(runs()).toBe(1);
  });

  it('withKey and the key option refuse empty or non-string keys', async () => {
    const { fn } = wrap();
    expect(() => fn.withKey('')).toThrow(TypeError);
    expect(() => fn.withKey(42 as unknown as string)).toThrow(TypeError);
    const { fn: keyed } = wrap({ key: () => '' });
    await expect(keyed()).rejects.toThrow(/"key" option/);
  });

  it('a context that returns undefined is refused (a missing thread id must not merge threads)', async () => {
    const { fn } = wrap({ context: () => undefined });
    await expect(fn(1)).rejects.toThrow(/context/);
  });
});
