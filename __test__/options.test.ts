import { describe, expect, it } from 'vitest';

import { lib } from './helpers';

const { idempotent } = lib;
const named = async function named() { return 1; };

describe('options are checked at wrap time', () => {
  const bad: Array<[string, Record<string, unknown>, typeof TypeError | typeof RangeError, RegExp]> = [
    ['an unknown onDuplicate', { onDuplicate: 'ignore' }, TypeError, /onDuplicate/],
    ['a negative ttlMs', { ttlMs: -1 }, RangeError, /ttlMs/],
    ['a zero ttlMs', { ttlMs: 0 }, RangeError, /ttlMs/],
    ['a non-finite leaseMs', { leaseMs: Infinity }, RangeError, /leaseMs/],
    ['NaN pollIntervalMs', { pollIntervalMs: NaN }, RangeError, /pollIntervalMs/],
    ['a negative pollTimeoutMs', { pollTimeoutMs: -5 }, RangeError, /pollTimeoutMs/],
    ['a string time', { leaseMs: '100' }, TypeError, /leaseMs/],
    ['a key that is not a function', { key: 'order-42' }, TypeError, /"key"/],
    ['a context that is not a function', { context: { thread: 1 } }, TypeError, /context/],
    ['a payload that is not a function', { payload: 1 }, TypeError, /payload/],
    ['a store without the interface', { store: { get() {} } }, TypeError, /store/],
    ['an empty name', { name: '' }, TypeError, /name/],
    ['a misspelt option', { ttl: 1000 }, TypeError, /"ttl" is not an option/],
  ];
  for (const [what, options, Kind, pattern] of bad) {
    it(`refuses ${what}`, () => {
      expect(() => idempotent(named, options as never)).toThrow(Kind);
      expect(() => idempotent(named, options as never)).toThrow(pattern);
    });
  }

  it('refuses an anonymous function without a name, and takes one with it', () => {
    expect(() => idempotent((() => () => 1)())).toThrow(/anonymous/);
    expect(idempotent((() => () => 1)(), { name: 'one' }).name).toBe('one');
  });

  it('refuses a fn that is not a function', () => {
    expect(() => idempotent('charge' as never)).toThrow(TypeError);
  });

  it('accepts pollTimeoutMs 0 and every documented option', () => {
    expect(() =>
      idempotent(named, {
        name: 'n', ttlMs: 1, onDuplicate: 'block', pollIntervalMs: 1, pollTimeoutMs: 0, leaseMs: 1,
        key: () => 'k', context: () => 1, payload: () => 1, onEvent: () => {},
      }),
    ).not.toThrow();
  });
});
