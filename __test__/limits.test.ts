// Issue 21 item 8: size limits. A key or an argument list over its limit is a TypeError
// before anything runs (no record, fn not run); a result over its limit is the
// "completed, but its result cannot be stored" case, now and on every replay.

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);

const { idempotent, step, SqliteStore, StoreError } = lib;
const store = new SqliteStore({ path: tempDb() });
afterAll(() => store.close());

async function refusedBeforeRunning(call: () => Promise<unknown>, pattern: RegExp, runs: () => number) {
  const err = await call().then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(TypeError);
  expect((err as Error).message).toMatch(pattern);
  expect(runs()).toBe(0);
}

describe('size limits (issue 21 item 8)', () => {
  it('documents its defaults', () => {
    const limits: typeof import('../dist/core/limits.js') = require(join(ROOT, 'dist', 'core', 'limits.js'));
    expect(limits.DEFAULT_LIMITS).toEqual({ maxKeyBytes: 2048, maxArgsBytes: 4 * 1024 * 1024, maxResultBytes: 16 * 1024 * 1024 });
  });

  // Before: every key and argument list was accepted, of any size.
  it('a key over maxKeyBytes (counted in UTF-8 bytes) is a TypeError before anything runs; at the limit it is fine', async () => {
    let runs = 0;
    const op = idempotent(async function keyedOp() {
      runs++;
      return 'ok';
    }, { store });
    const before = (await store.listRecords()).length;
    await refusedBeforeRunning(() => op.withKey('k'.repeat(2049))(), /the key of a call of "keyedOp" is 2049 bytes, over the limit of 2048 bytes \(the "maxKeyBytes" option\)/, () => runs);
    await refusedBeforeRunning(() => op.withKey('é'.repeat(1025))(), /"keyedOp" is 2050 bytes/, () => runs);
    const byOption = idempotent(async function byKeyOption(id: string) {
      runs++;
      return id;
    }, { store, key: (id) => id, maxKeyBytes: 100 });
    await refusedBeforeRunning(() => byOption('x'.repeat(101)), /"maxKeyBytes"/, () => runs);
    expect((await store.listRecords()).length).toBe(before); // nothing was claimed
    expect(await op.withKey('k'.repeat(2048))()).toBe('ok');
    expect(await byOption('x'.repeat(100))).toBe('x'.repeat(100));
    expect(runs).toBe(2);
  });

  it('an argument list over maxArgsBytes is a TypeError before anything runs, derived key or explicit', async () => {
    let runs = 0;
    const send = idempotent(async function sendDoc(doc: string) {
      runs++;
      return doc.length;
    }, { store });
    await refusedBeforeRunning(() => send('x'.repeat(4 * 1024 * 1024)), /the arguments of a call of "sendDoc" are 4194308 bytes as JSON, over the limit of 4194304 bytes \(the "maxArgsBytes" option\)/, () => runs);
    expect(() => send.keyFor('x'.repeat(4 * 1024 * 1024))).toThrow(TypeError);
    await refusedBeforeRunning(() => send.withKey('doc-1')('x'.repeat(4 * 1024 * 1024)), /"maxArgsBytes"/, () => runs);
    const small = idempotent(async function smallArgs(a: unknown) {
      runs++;
      return a;
    }, { store, maxArgsBytes: 20 });
    await refusedBeforeRunning(() => small({ text: 'more than twenty bytes' }), /over the limit of 20 bytes/, () => runs);
    expect(await small('fits')).toBe('fits'); // ["fits"]: 8 bytes
    expect(runs).toBe(1);
  });

  it('a result over maxResultBytes: completed, the unstorable TypeError now and on replays, fn runs once, never a StoreError', async () => {
    let runs = 0;
    const big = idempotent(async function bigResult() {
      runs++;
      return { text: 'y'.repeat(1000) };
    }, { store, maxResultBytes: 500 });
    for (let i = 0; i < 3; i++) {
      const err = await big().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(TypeError);
      expect(err).not.toBeInstanceOf(StoreError);
      expect((err as Error).message).toMatch(/"bigResult" ran, but its result cannot be stored: it is 1011 bytes as JSON, over the limit of 500 bytes \(the "maxResultBytes" option\)/);
    }
    expect(runs).toBe(1);
    const record = await store.get(big.keyFor());
    expect(record?.status).toBe('completed');
    expect(record?.result).toBeUndefined();
  });

  it('a step\'s result is held to the call\'s maxResultBytes', async () => {
    let steps = 0;
    const outer = idempotent(async function withBigStep() {
      return step('fetch', () => {
        steps++;
        return 'z'.repeat(300);
      });
    }, { store, maxResultBytes: 100 });
    const err = await outer().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toMatch(/step \S*fetch\S* ran, but its result cannot be stored: it is 302 bytes as JSON, over the limit of 100 bytes/);
    expect(steps).toBe(1);
  });

  it.each([
    ['maxKeyBytes', 0, RangeError],
    ['maxKeyBytes', -1, RangeError],
    ['maxArgsBytes', 1.5, RangeError],
    ['maxResultBytes', Infinity, RangeError],
    ['maxResultBytes', NaN, RangeError],
    ['maxArgsBytes', '1000', TypeError],
  ] as const)('option %s = %s is refused at wrap time, naming it', (option, value, Kind) => {
    expect(() => idempotent(async function limited() {}, { store, [option]: value as never })).toThrow(Kind);
    expect(() => idempotent(async function limited() {}, { store, [option]: value as never })).toThrow(new RegExp(`option "${option}" must be`));
  });
});

describe('the size limits through a framework helper', () => {
  it('idempotentTool takes maxResultBytes as its type says (it was refused as "not an option")', async () => {
    const { idempotentTool } = require(join(ROOT, 'dist', 'integrations', 'ai-sdk.js')) as typeof import('../dist/integrations/ai-sdk.js');
    const store = new lib.SqliteStore({ path: tempDb() });
    let runs = 0;
    const execute = idempotentTool(
      async function report(input: { n: number }) {
        runs++;
        return 'x'.repeat(input.n);
      },
      { store, scope: 'chat-1', maxResultBytes: 64 },
    );
    const options = { toolCallId: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', messages: [] } as unknown as Parameters<typeof execute>[1];
    await expect(execute({ n: 100 }, options)).rejects.toThrow(/cannot be stored.*maxResultBytes/s);
    await expect(execute({ n: 100 }, options)).rejects.toThrow(/cannot be stored/);
    expect(runs).toBe(1);
    await store.close();
  });
});
