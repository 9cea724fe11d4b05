// Values JSON would flatten silently are refused, so two different calls never share a
// derived key; and the choices where JSON itself cannot tell values apart.

import { describe, expect, it } from 'vitest';

import { lib, tempDb } from './helpers';

const { idempotent, SqliteStore } = lib;
const probe = idempotent(function probe(..._args: unknown[]) {
  return 1;
}, { store: new SqliteStore({ path: tempDb() }) });

describe('canonical JSON refuses what JSON flattens', () => {
  it('an invalid Date (JSON: null) is refused, naming where it sits', () => {
    expect(() => probe.keyFor({ at: new Date('nope') })).toThrow(/args\[0\]\.at is an invalid Date/);
    expect(() => probe.keyFor(null)).not.toThrow();
    // A valid Date takes part as its ISO string.
    expect(probe.keyFor(new Date(0))).toBe(probe.keyFor('1970-01-01T00:00:00.000Z'));
  });

  it('RegExp match arrays from different inputs do not share a key: refused', () => {
    const a = /o/.exec('foo')!;
    const b = /o/.exec('boo')!;
    expect(() => probe.keyFor(a)).toThrow(/args\[0\] is an array with an own property "index"/);
    expect(() => probe.keyFor(b)).toThrow(TypeError);
    const tagged = Object.assign([1, 2], { note: 'x' });
    expect(() => probe.keyFor({ list: tagged })).toThrow(/args\[0\]\.list is an array with an own property "note"/);
    // Non-enumerable extras are not data (JSON and Object.keys skip them), as on objects.
    const hidden = [1, 2];
    Object.defineProperty(hidden, 'meta', { value: 1, enumerable: false });
    expect(probe.keyFor(hidden)).toBe(probe.keyFor([1, 2]));
  });

  it('Array subclasses and boxed primitives are refused', () => {
    class Batch extends Array<number> {}
    expect(() => probe.keyFor(Batch.from([1]))).toThrow(/an instance of Batch/);
    expect(() => probe.keyFor(new String('a'))).toThrow(/a boxed String/);
    expect(() => probe.keyFor(new Number(1))).toThrow(/a boxed Number/);
    expect(() => probe.keyFor(new Boolean(false))).toThrow(/a boxed Boolean/);
  });

  it('-0 and 0 are one call (JSON writes both as 0, and a replay gives 0)', () => {
    expect(probe.keyFor(-0)).toBe(probe.keyFor(0));
    expect(probe.keyFor({ x: [-0] })).toBe(probe.keyFor({ x: [0] }));
  });

  it('a getter is read once, like JSON reads it: its value takes part', () => {
    const withGetter = { get total() { return 3; } };
    expect(probe.keyFor(withGetter)).toBe(probe.keyFor({ total: 3 }));
  });

  it('results follow the same rule: an invalid Date in a result is the unstorable TypeError, fn runs once', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let runs = 0;
    const f = idempotent(async function stamp() {
      runs++;
      return { at: new Date(NaN) };
    }, { store });
    await expect(f()).rejects.toThrow(/result\.at is an invalid Date/);
    await expect(f()).rejects.toThrow(TypeError);
    expect(runs).toBe(1);
    expect((await store.get(f.keyFor()))?.status).toBe('completed');
    await store.close();
  });
});
