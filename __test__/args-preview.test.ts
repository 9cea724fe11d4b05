// The opt-in arguments preview: off by default, redacted, capped, never breaking a call.

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const preview: typeof import('../dist/args-preview.js') = require(join(ROOT, 'dist', 'args-preview.js'));
type Store = import('../dist/store.js').Store;
type AcquireRequest = import('../dist/store.js').AcquireRequest;

const store = new lib.SqliteStore({ path: tempDb() });
afterAll(() => store.close());

/** The real store, with every acquire request it is sent kept for the test to read. */
function watched(real: Store): { store: Store; requests: AcquireRequest[] } {
  const requests: AcquireRequest[] = [];
  const s: Store = {
    get: (k) => real.get(k),
    acquire: (r) => {
      requests.push(r);
      return real.acquire(r);
    },
    complete: (r) => real.complete(r),
    fail: (r) => real.fail(r),
    renew: (k, t, l) => real.renew!(k, t, l),
    listRecords: (o) => real.listRecords(o),
    clear: (k) => real.clear(k),
    close: () => real.close(),
  };
  return { store: s, requests };
}


describe('previewText', () => {
  it('redacts values under sensitive keys, at any depth and in any spelling', () => {
    const text = preview.previewText({
      user: 'ann',
      password: 'hunter2',
      nested: { accessToken: 'abc', 'X-Authorization': 'Bearer x', api_key: 'k' },
      list: [{ SSN: '078-05-1120', Email: 'a' }],
    });
    for (const secret of ['hunter2', 'abc', 'Bearer x', '"k"', '078-05-1120']) expect(text).not.toContain(secret);
    expect(JSON.parse(text)).toEqual({
      user: 'ann',
      password: '[redacted]',
      nested: { accessToken: '[redacted]', 'X-Authorization': '[redacted]', api_key: '[redacted]' },
      list: [{ SSN: '[redacted]', Email: '[redacted]' }],
    });
    expect(JSON.parse(preview.previewText({ card_number: '1', cvv: '123', secret: 's', amount: 12.5 }))).toEqual({
      card_number: '[redacted]',
      cvv: '[redacted]',
      secret: '[redacted]',
      amount: 12.5,
    });
  });

  it('redacts strings that look like an email address or a card number wherever they are', () => {
    const text = preview.previewText(['ann@example.com', 'card 4111 1111 1111 1111', 'order-42', 42]);
    expect(JSON.parse(text)).toEqual(['[redacted]', '[redacted]', 'order-42', 42]);
  });

  it('caps the text at 200 characters', () => {
    const text = preview.previewText({ note: 'x'.repeat(1000), more: Array.from({ length: 500 }, (_, i) => i) });
    expect(text.length).toBe(preview.PREVIEW_MAX_CHARS);
    expect(text.endsWith('…')).toBe(true);
  });

  it('never throws: cycles, BigInt, functions, symbols, throwing getters', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const hostile = {
      get boom(): never {
        throw new Error('getter exploded');
      },
    };
    expect(preview.previewText(cyclic)).toBe('{"a":1,"self":"[cycle]"}');
    expect(preview.previewText([10n, () => 1, Symbol('s'), undefined, NaN])).toBe(
      '["10n","[function anonymous]","Symbol(s)",null,"NaN"]',
    );
    expect(preview.previewText(hostile)).toMatch(/^\[no preview: getter exploded\]$/);
  });
});

describe('the "preview" option', () => {
  it('is off by default: nothing about the arguments is sent to the store', async () => {
    const { store: s, requests } = watched(store);
    const send = lib.idempotent(async function sendOff(to: string) {
      return to.length;
    }, { store: s });
    await send('bob');
    expect(requests).toHaveLength(1);
    expect(requests[0].meta?.argsPreview).toBeUndefined();
  });

  it('true: the redacted arguments go with the claim', async () => {
    const { store: s, requests } = watched(store);
    const refund = lib.idempotent(async function refundOn(order: { id: string; email: string }, cents: number) {
      return { refunded: order.id, cents };
    }, { store: s, preview: true });
    await refund({ id: 'o-1', email: 'ann@example.com' }, 500);
    expect(requests[0].meta?.argsPreview).toBe('[{"id":"o-1","email":"[redacted]"},500]');
  });

  it('a function picks what is shown; if it throws, the call still runs and the preview says why', async () => {
    const { store: s, requests } = watched(store);
    let runs = 0;
    const picked = lib.idempotent(async function picked(order: { id: string }) {
      runs++;
      return order.id;
    }, { store: s, preview: (order) => ({ order: order.id }) });
    await picked({ id: 'o-2' });
    expect(requests[0].meta?.argsPreview).toBe('{"order":"o-2"}');

    const broken = lib.idempotent(async function brokenPreview(order: { id: string }) {
      runs++;
      return order.id;
    }, {
      store: s,
      preview: () => {
        throw new Error('no id');
      },
    });
    expect(await broken({ id: 'o-3' })).toBe('o-3');
    expect(requests[1].meta?.argsPreview).toBe('[no preview: the "preview" option threw no id]');
    expect(runs).toBe(2);
  });

  it('a bad value fails at wrap time, naming the option', () => {
    expect(() => lib.idempotent(async function bad() {}, { store, preview: 'yes' as unknown as boolean })).toThrow(
      /option "preview" must be true, false or a function/,
    );
  });

  it('the preview is kept with the record and read back by get()', async () => {
    const charge = lib.idempotent(async function chargeKept(card: { number: string }, cents: number) {
      return cents;
    }, { store, preview: true });
    await charge({ number: '4111111111111111' }, 900);
    const record = await store.get(charge.keyFor({ number: '4111111111111111' }, 900));
    expect(record?.meta?.argsPreview).toBe('[{"number":"[redacted]"},900]');
  });
});
