// Property tests of the canonical encoding, and a corpus of strange inputs: each gets a
// clear error or a correct answer, never a crash or a hang.

import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { ROOT, lib, runNode, tempDb, tempDir } from './helpers';

const { idempotent, SqliteStore, StoreError } = lib;
const probe = idempotent(function probe(..._args: unknown[]) { return 1; }, { store: new SqliteStore({ path: tempDb() }) });

/** Rebuilds every object with its keys in another (reversed) order. */
function reorder(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reorder);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reorder(v)]));
  }
  return value;
}

/** What JSON can tell apart: sorted-key JSON text. */
function meaning(value: unknown): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sort) : v !== null && typeof v === 'object'
      ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])]))
      : v;
  return JSON.stringify(sort(value));
}

const LOSSY: Array<[string, () => unknown]> = [
  ['function', () => () => 1],
  ['symbol', () => Symbol('x')],
  ['NaN', () => NaN],
  ['Infinity', () => Infinity],
  ['BigInt', () => 1n],
  ['Map', () => new Map()],
  ['Set', () => new Set()],
  ['Uint8Array', () => new Uint8Array(1)],
  ['class instance', () => new (class Thing {})()],
];

describe('canonical encoding, by property', () => {
  it('key order and equal values give one key', () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => {
      expect(probe.keyFor(reorder(value))).toBe(probe.keyFor(value));
    }), { numRuns: 300 });
  });

  it('values JSON can tell apart never share a key', () => {
    fc.assert(fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
      fc.pre(meaning(a) !== meaning(b));
      expect(probe.keyFor(a)).not.toBe(probe.keyFor(b));
    }), { numRuns: 300 });
  });

  it('a string, as a value or as a key, is written exactly as JSON.stringify writes it', () => {
    // The encoder quotes short plain strings itself (canonical.ts, `quoted`): every escape
    // JSON.stringify makes must still be made, lone surrogates included, at every length
    // around where it hands strings to JSON.stringify.
    const canonical: typeof import('../dist/core/canonical.js') = require(join(ROOT, 'dist', 'core', 'canonical.js'));
    const odd = fc.constantFrom('a', 'é', '"', '\\', '/', '\u0000', '\u0008', '\u001f', '\u007f', '\ud800', '\udbff', '\udc00', '\udfff', '😀', '\u2028', '\ufffd');
    const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 80 }), fc.string({ unit: odd, maxLength: 80 }));
    fc.assert(fc.property(text, (s) => {
      expect(canonical.canonicalJson(s)).toBe(JSON.stringify(s));
      expect(canonical.canonicalJson({ [s]: [s] })).toBe(JSON.stringify({ [s]: [s] }));
      expect(canonical.resultJson({ [s]: s })).toBe(JSON.stringify({ [s]: s }));
    }), { numRuns: 2000 });
  });

  it("an object's keys are written in sort() order, whether few (sorted in place) or many", () => {
    // canonical.ts sorts up to 16 keys itself and more with sort(): both must give the order
    // every earlier release wrote (UTF-16 code units), or a key derived before an upgrade
    // would not be found after it.
    const canonical: typeof import('../dist/core/canonical.js') = require(join(ROOT, 'dist', 'core', 'canonical.js'));
    const name = fc.oneof(fc.string({ maxLength: 4 }), fc.string({ unit: 'binary', maxLength: 4 }), fc.nat({ max: 40 }).map(String));
    const value = fc.oneof(fc.integer(), fc.string({ maxLength: 3 }));
    const object = fc.oneof(fc.dictionary(name, value, { maxKeys: 16 }), fc.dictionary(name, value, { minKeys: 17, maxKeys: 40 }));
    fc.assert(fc.property(object, (o) => {
      const expected = '{' + Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${JSON.stringify(o[k])}`).join(',') + '}';
      expect(canonical.canonicalJson(o)).toBe(expected);
    }), { numRuns: 1000 });
  });

  it('a lossy value anywhere is refused, naming where it sits', () => {
    const path = fc.array(fc.oneof(fc.nat({ max: 3 }), fc.constantFrom('a', 'b', 'odd key')), { minLength: 1, maxLength: 5 });
    fc.assert(fc.property(path, fc.constantFrom(...LOSSY), (segments, [, make]) => {
      // Build a container that holds the lossy value at `segments`.
      let value: unknown = make();
      let expected = '';
      for (let i = segments.length - 1; i >= 0; i--) {
        const s = segments[i];
        if (typeof s === 'number') {
          const arr: unknown[] = Array.from({ length: s + 1 }, (_, j) => j);
          arr[s] = value;
          value = arr;
          expected = `[${s}]${expected}`;
        } else {
          value = { z: 1, [s]: value };
          expected = (/^[A-Za-z_$][\w$]*$/.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`) + expected;
        }
      }
      expect(() => probe.keyFor('first', value)).toThrow(`args[1]${expected} is `);
    }), { numRuns: 200 });
  });

  it('results round-trip: a replay equals what JSON keeps of the first result', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let n = 0;
    const echo = idempotent(async function echo(_i: number, value: unknown) { n++; return value; }, {
      store,
      payload: (i) => i,
    });
    await fc.assert(fc.asyncProperty(fc.jsonValue(), async (value) => {
      const i = n;
      const first = await echo(i, value);
      const replayed = await echo(i, 'ignored: the payload is the index');
      expect(meaning(replayed)).toBe(meaning(first));
    }), { numRuns: 200 });
    await store.close();
  });
});

describe('odd arguments', () => {
  it('huge strings are keyed up to maxArgsBytes (and differ by their last character); over it, a TypeError', () => {
    const big = 'x'.repeat(20_000_000);
    const roomy = idempotent(function roomy(..._args: unknown[]) { return 1; }, { store: new SqliteStore({ path: tempDb() }), maxArgsBytes: 32 * 1024 * 1024 });
    expect(roomy.keyFor(big + 'a')).not.toBe(roomy.keyFor(big + 'b'));
    expect(() => probe.keyFor(big)).toThrow(/over the limit of 4194304 bytes \(the "maxArgsBytes" option\)/);
  });

  it('unicode edge cases are distinct keys, including lone surrogates that UTF-8 cannot carry', () => {
    const strings = ['\ud800', '\udc00', '\ufffd', 'e\u0301', '\u00e9', '😀', '\u0000', '', ' ', '\u2028'];
    expect(new Set(strings.map((s) => probe.keyFor(s))).size).toBe(strings.length);
    expect(new Set(strings.map((s) => probe.keyFor({ [s]: 1 }))).size).toBe(strings.length);
  });

  it('a proxy of a plain object is read like the object; a hostile proxy is a clear error', () => {
    expect(probe.keyFor(new Proxy({ a: 1 }, {}))).toBe(probe.keyFor({ a: 1 }));
    const hostile = new Proxy({}, { ownKeys() { throw new Error('trap!'); } });
    expect(() => probe.keyFor(hostile)).toThrow(/args\[0\] is an object that could not be read \(Error: trap!\)/);
    const liar = new Proxy({}, { getPrototypeOf() { throw new Error('no prototype'); } });
    expect(() => probe.keyFor({ x: liar })).toThrow(/args\[0\]\.x/);
  });

  it('a toJSON that returns itself, or something lossy, is refused', () => {
    const selfish = { toJSON() { return this; } };
    expect(() => probe.keyFor(selfish)).toThrow(/cycle/);
    expect(() => probe.keyFor({ d: { toJSON: () => NaN } })).toThrow(/args\[0\]\.d is NaN/);
  });

  it('a thrown non-Error (a string, null) is recorded and rethrown unchanged', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const throwsString = idempotent(async function throwsString(what: unknown) { throw what; }, { store });
    await expect(throwsString('plain string')).rejects.toBe('plain string');
    await expect(throwsString(null)).rejects.toBe(null);
    expect((await store.get(throwsString.keyFor('plain string')))?.error).toEqual({ name: 'NonErrorThrown', message: 'plain string' });
    await store.close();
  });
});

describe('odd files and command lines', () => {
  it('random bytes as a store file, with or without a SQLite header: a StoreError naming it', async () => {
    for (const head of [Buffer.alloc(0), Buffer.from('SQLite format 3\0')]) {
      const path = join(tempDir(), 'random.db');
      writeFileSync(path, Buffer.concat([head, randomBytes(64 * 1024)]));
      let runs = 0;
      const op = idempotent(async function op() { runs++; }, { store: new SqliteStore({ path }) });
      const err = await op().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(StoreError);
      expect((err as Error).message).toContain(path);
      expect(runs).toBe(0);
    }
  });

  it('absurd CLI arguments give messages, not stack traces', async () => {
    const db = tempDb();
    const store = new SqliteStore({ path: db });
    await idempotent(async function op() { return 1; }, { store })();
    await store.close();
    const cases: string[][] = [
      ['--db', db, 'inspect', '--key', 'k'.repeat(100_000)],
      ['--db', db, 'inspect', '--key', 'line\nbreak\ttab'],
      ['--db', '', 'inspect'],
      ['--db', '/dev/null', 'inspect'],
      ['--db', '/proc/self/mem', 'stats'],
      ['--db', db, '--redis', 'redis://x', 'inspect'],
      ['--redis', 'not a url', 'inspect'],
      ['--redis', 'http://127.0.0.1:1', 'inspect'],
      ['--db', db, 'inspect', '--json', '--json'],
      ['--db', db, '💥'],
      ['--db', db, 'clear', '--key', ''],
      ['--prefix', 'x', 'inspect'],
    ];
    for (const args of cases) {
      const r = await runNode([join(ROOT, 'dist', 'cli.js'), ...args]);
      expect([0, 1, 2], args.join(' ').slice(0, 80)).toContain(r.code);
      expect(r.stderr, args.join(' ').slice(0, 80)).not.toMatch(/\n\s+at /);
      expect(r.stderr).not.toMatch(/panicked|RUST_BACKTRACE/);
    }
  });
});
