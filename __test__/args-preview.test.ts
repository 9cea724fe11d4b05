// The opt-in arguments preview: off by default, redacted, capped, never breaking a call.

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const preview: typeof import('../dist/core/args-preview.js') = require(join(ROOT, 'dist', 'core', 'args-preview.js'));
type Store = import('../dist/core/store.js').Store;
type AcquireRequest = import('../dist/core/store.js').AcquireRequest;

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

describe('the redaction rules, one kind at a time (issue 21 item 1)', () => {
  const PEM = [
    '-----BEGIN RSA PRIVATE KEY-----',
    'MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB',
    'aFDrBz9vFqU4yQIDAQABAoIBAHlJ4Bm3cL9wqqJv2j6p2mW8ZxQnRzT9a4s3u1aa',
    '-----END RSA PRIVATE KEY-----',
  ].join('\n');
  // [kind, the arguments, what must not appear, the preview expected]
  const kinds: Array<[string, unknown, string[], unknown]> = [
    ['a header tuple [[name, value]], as fetch takes headers',
      ['https://api.example.com', { headers: [['Content-Type', 'application/json'], ['Authorization', 'Bearer sk-live-abc123']] }],
      ['sk-live-abc123'],
      ['https://api.example.com', { headers: [['Content-Type', 'application/json'], ['Authorization', '[redacted]']] }]],
    ['a header line',
      ['GET / HTTP/1.1\r\nHost: example.com\r\nauthorization: Basic dXNlcjpodW50ZXIy\r\nX-Api-Key: k-998877'],
      ['dXNlcjpodW50ZXIy', 'k-998877'],
      ['GET / HTTP/1.1\r\nHost: example.com\r\nauthorization: [redacted]\r\nX-Api-Key: [redacted]']],
    ['a Bearer or Basic credential in a string',
      ['use Bearer eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW8opsbCGfG_HACGpVUMN_a9IV7pAx_Zmeo', 'Basic dXNlcjpwYXNz'],
      ['eyJhbGciOiJIUzI1NiJ9', 'dXNlcjpwYXNz'],
      ['use Bearer [redacted]', 'Basic [redacted]']],
    ['secret query parameters in a URL',
      ['https://api.example.com/v1/me?access_token=ya29.a0Af&page=2', 'https://maps.example.com/q?api_key=AIzaSyD-9tS&x=1#top', 'https://h/p?X-Amz-Signature=ab12cd&id=7'],
      ['ya29.a0Af', 'AIzaSyD-9tS', 'ab12cd'],
      ['https://api.example.com/v1/me?access_token=[redacted]&page=2', 'https://maps.example.com/q?api_key=[redacted]&x=1#top', 'https://h/p?X-Amz-Signature=[redacted]&id=7']],
    ['JSON inside a string',
      [{ body: JSON.stringify({ user: 'ann', password: 'hunter2', nested: { client_secret: 's3cr3t' } }) }],
      ['hunter2', 's3cr3t'],
      [{ body: JSON.stringify({ user: 'ann', password: '[redacted]', nested: { client_secret: '[redacted]' } }) }]],
    ['a Luhn-valid card number, as a number or a string',
      [{ pan: 4111111111111111, n: 5555555555554444 }, 378282246310005, 'pay 6011-1111-1111-1117 now', 4111111111111112, 1_764_806_400_000],
      ['4111111111111111', '5555555555554444', '378282246310005', '6011-1111-1111-1117'],
      [{ pan: '[redacted]', n: '[redacted]' }, '[redacted]', '[redacted]', 4111111111111112, 1_764_806_400_000]],
    ['a PEM private key',
      [{ note: `the key:\n${PEM}\nkeep it safe` }],
      ['MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn', 'AoIBAHlJ4Bm3cL9wqqJv'],
      [{ note: 'the key:\n[redacted private key]\nkeep it safe' }]],
    ['names with private, pass, pwd, credential, auth or passphrase',
      [{ privateKey: 'pk', passphrase: 'open sesame', db_pwd: 'pw1', credentials: { user: 'u' }, authHeader: 'h', passcode: 1234, id: 'o-1' }],
      ['"pk"', 'open sesame', 'pw1', '"u"', '"h"', '1234'],
      [{ privateKey: '[redacted]', passphrase: '[redacted]', db_pwd: '[redacted]', credentials: '[redacted]', authHeader: '[redacted]', passcode: '[redacted]', id: 'o-1' }]],
    ['bytes: a Buffer, a typed array, an ArrayBuffer',
      [Buffer.from('secret-bytes'), new Uint8Array([1, 2, 3]), new ArrayBuffer(5), { blob: new Float64Array(2) }],
      ['secret', '"data"', '"0":'],
      ['[12 bytes]', '[3 bytes]', '[5 bytes]', { blob: '[16 bytes]' }]],
    ['a password in a URL',
      ['postgres://app:hunter2@db.example.com/app', 'redis://:s3cret@cache:6379/0'],
      ['hunter2', 's3cret'],
      ['postgres://app:[redacted]@db.example.com/app', 'redis://:[redacted]@cache:6379/0']],
  ];

  it.each(kinds)('%s', (_, args, secrets, expected) => {
    const text = preview.previewText(args);
    for (const secret of secrets) expect(text).not.toContain(secret);
    expect(JSON.parse(text)).toEqual(expected);
  });

  it('every kind is one row of one table of rules', () => {
    const kindsOfRules = preview.REDACTION_RULES.map((r) => r.kind);
    expect(new Set(kindsOfRules).size).toBe(kindsOfRules.length);
    for (const kind of ['sensitive name', 'header tuple', 'header line', 'authorization scheme', 'secret query parameter',
      'JSON inside a string', 'card number', 'card number given as a number', 'PEM private key', 'bytes', 'email address', 'password in a URL']) {
      expect(kindsOfRules).toContain(kind);
    }
  });

  it('a secret past the 200-character cap is redacted before the text is cut', () => {
    const text = preview.previewText([`${'x'.repeat(178)} Bearer abcdefghijklmnopqrstuvwxyz0123456789`]);
    expect(text).not.toContain('abcdefghij');
    const pem = preview.previewText([`${'y'.repeat(150)}${PEM}`]);
    expect(pem).not.toContain('MIIEow');
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
