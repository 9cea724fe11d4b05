// The inspector page's server without a browser: token, Host check, API errors, and
// replays counted from live events when it runs inside the application.

import { request } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const ui: typeof import('../dist/apps/ui/server.js') = require(join(ROOT, 'dist', 'apps', 'ui', 'server.js'));

const store = new lib.SqliteStore({ path: tempDb() });
let inspector: Awaited<ReturnType<typeof ui.serveInspector>>;
let origin: string;

beforeAll(async () => {
  inspector = await ui.serveInspector({ store, where: 'test store' });
  origin = new URL(inspector.url).origin;
});
afterAll(async () => {
  await inspector.close();
  await store.close();
});

const withToken = (path: string, init: RequestInit = {}) =>
  fetch(`${origin}${path}`, { ...init, headers: { 'x-inspector-token': inspector.token, ...(init.headers ?? {}) } });
const post = (path: string, body: unknown) =>
  withToken(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

function getWithHost(host: string): Promise<number> {
  return new Promise((done, fail) => {
    const req = request(`${inspector.url}`, { headers: { host } }, (res) => {
      res.resume();
      done(res.statusCode!);
    });
    req.on('error', fail);
    req.end();
  });
}

describe('serveInspector', () => {
  it('listens on 127.0.0.1 only, with a long random token in its URL', () => {
    expect(inspector.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]{43}$/);
  });

  it('refuses requests without the token, with a wrong one, or for another Host', async () => {
    expect((await fetch(`${origin}/api/records`)).status).toBe(403);
    expect((await fetch(`${origin}/api/records`, { headers: { 'x-inspector-token': 'x' } })).status).toBe(403);
    expect((await fetch(inspector.url)).status).toBe(200);
    expect(await getWithHost(`evil.example:${inspector.port}`)).toBe(403);
    expect(await getWithHost(`localhost:${inspector.port}`)).toBe(200);
  });

  it('counts replays from the live events, which no record shows', async () => {
    const refund = lib.idempotent(async function refund(order: string) {
      return order;
    }, { store });
    await refund('o-1');
    await refund('o-1');
    await refund('o-1');
    const timeline = await (await withToken('/api/timeline?name=refund')).json();
    expect(timeline.live).toBe(true);
    const counts = timeline.tools.find((t: { name: string }) => t.name === 'refund').counts;
    const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
    expect(sum(counts.executed)).toBe(1);
    expect(sum(counts.replayed)).toBe(2);
  });

  it('POST /api/release: a claim nobody holds by default; { reconcile: false } makes it failed; anything else is a 400', async () => {
    for (const key of ['page-stuck-a', 'page-stuck-b']) {
      await store.acquire({ key, name: 'op', fingerprint: 'fp', leaseMs: 600_000, force: false });
    }
    const bad = await post('/api/release', { key: 'page-stuck-a', reconcile: 'no' });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatch(/reconcile must be true .* or false/);
    expect(await (await post('/api/release', { key: 'page-stuck-a' })).json()).toEqual({ released: 'page-stuck-a', reconcile: true });
    const a = await store.get('page-stuck-a');
    expect(a?.status).toBe('pending');
    expect(a!.leaseExpiresAt!).toBeLessThanOrEqual(Date.now());
    expect(await (await post('/api/release', { key: 'page-stuck-b', reconcile: false })).json()).toEqual({ released: 'page-stuck-b', reconcile: false });
    expect((await store.get('page-stuck-b'))?.status).toBe('failed');
  });

  it('records come with the keyed id their events carry (one id per record, issue 31 item 5)', async () => {
    const ids: string[] = [];
    const ping = lib.idempotent(async function ping(n: number) {
      return n;
    }, { store, onEvent: (e) => ids.push(e.keyId) });
    await ping(7);
    const { records } = await (await withToken('/api/records?name=ping')).json();
    expect(records.map((r: { keyId: string }) => r.keyId)).toEqual([ids[0]]);
    const { record } = await (await withToken(`/api/record?key=${ping.keyFor(7)}`)).json();
    expect(record.keyId).toBe(ids[0]);
    // The page's key filter takes the id too.
    const byId = await (await withToken(`/api/records?key=${ids[0].slice(0, 12)}`)).json();
    expect(byId.records.map((r: { name: string }) => r.name)).toEqual(['ping']);
  });

  it('answers bad requests with what was wrong', async () => {
    const bad = await withToken('/api/records?status=done');
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatch(/give pending, completed or failed/);
    const missing = await post('/api/clear', { key: 'nope' });
    expect(missing.status).toBe(404);
    const done = (await (await withToken('/api/records?name=refund')).json()).records[0];
    const prefix = await post('/api/clear', { key: done.key.slice(0, 8) }); // never a prefix from the page
    expect(prefix.status).toBe(404);
    expect(await store.get(done.key)).not.toBeNull();
    const notPending = await post('/api/release', { key: done.key });
    expect(notPending.status).toBe(409);
    expect((await notPending.json()).error).toMatch(/is completed, not pending/);
    const notJson = await withToken('/api/clear', { method: 'POST', body: 'key=x' });
    expect(notJson.status).toBe(415);
    expect((await post('/api/clear', { key: done.key })).status).toBe(200);
    expect(await store.get(done.key)).toBeNull();
  });
});

describe('serveInspector({ token }) (issue 21 item 4)', () => {
  // Before: every one of these was accepted; '' opened the page with ?token=.
  it.each([
    ['an empty token', ''],
    ['a short token', 'abc123'],
    ['15 characters', 'a'.repeat(15)],
    ['a token with $&', `${'a'.repeat(16)}$&`],
    ['a token with a quote and <', `${'a'.repeat(16)}"><script>`],
    ['a token with a space', `${'a'.repeat(16)} b`],
    ['a token with non-ASCII letters', `${'a'.repeat(16)}é`],
    ['a number', 1234567890123456789 as never],
  ])('refuses %s with a TypeError naming the option', async (_, token) => {
    const err = await ui.serveInspector({ store, token }).then(
      (i) => i.close().then(() => undefined),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toMatch(/serveInspector: token must be at least 16 URL-safe characters \(A-Z, a-z, 0-9, _ and -\)/);
  });

  it('checks its other options, naming the one that is wrong', async () => {
    await expect(ui.serveInspector({ store, port: 70000 })).rejects.toThrow(/serveInspector: port must be an integer/);
    await expect(ui.serveInspector({ store, tokn: 'x' } as never)).rejects.toThrow(/unknown option "tokn"/);
    await expect(ui.serveInspector({ store: {} as never })).rejects.toThrow(/serveInspector: store must be a store/);
    await expect(ui.serveInspector({ store, liveEvents: 'no' as never })).rejects.toThrow(TypeError);
  });

  it('takes a URL-safe token of 16 characters or more, and writes it into the page as given', async () => {
    const token = 'Ab0_-'.repeat(4); // "$&" cannot appear: the page is built without replacement patterns
    const mine = await ui.serveInspector({ store, token });
    try {
      expect(mine.token).toBe(token);
      expect(mine.url).toBe(`http://127.0.0.1:${mine.port}/?token=${token}`);
      const page = await (await fetch(mine.url)).text();
      expect(page).toContain(`<meta name="inspector-token" content="${token}">`);
      expect(page).not.toContain('__TOKEN__');
    } finally {
      await mine.close();
    }
  });
});

describe('the page lists without results (issue 21 item 6)', () => {
  // Before: each refresh read every record with its full result, twice (records and timeline).
  it('/api/records sends no results; /api/record?key= sends one record in full, for Details', async () => {
    const mine = new lib.SqliteStore({ path: tempDb() });
    const page = await ui.serveInspector({ store: mine });
    try {
      const big = lib.idempotent(async function bigReport(n: number) {
        return { n, text: 'r'.repeat(1_000_000) };
      }, { store: mine });
      await big(1);
      await big(2);
      const get = (path: string) => fetch(`${new URL(page.url).origin}${path}`, { headers: { 'x-inspector-token': page.token } });
      const listed = await get('/api/records?since=');
      const text = await listed.text();
      expect(text.length).toBeLessThan(10_000);
      const { records, matched } = JSON.parse(text);
      expect(matched).toBe(2);
      expect(records.map((r: { key: string }) => r.key)).toEqual([big.keyFor(2), big.keyFor(1)]);
      expect(records.every((r: Record<string, unknown>) => !('result' in r))).toBe(true);
      const one = await (await get(`/api/record?key=${encodeURIComponent(big.keyFor(1))}`)).json();
      expect(one.record.result.text).toHaveLength(1_000_000);
      expect((await get('/api/record?key=nope')).status).toBe(404);
      expect((await get('/api/record')).status).toBe(400);
      const timeline = await get('/api/timeline?since=1h');
      expect((await timeline.text()).length).toBeLessThan(10_000);
    } finally {
      await page.close();
      await mine.close();
    }
  });
});

describe('SqliteStore.listRecent: filters, limit and order in the query (issue 21 item 6)', () => {
  it('the newest matching records, how many matched, results only when asked', async () => {
    const mine = new lib.SqliteStore({ path: tempDb() });
    const a = lib.idempotent(async function alpha(n: number) { return { n }; }, { store: mine });
    const b = lib.idempotent(async function beta(n: number) { return { n }; }, { store: mine });
    for (let i = 0; i < 5; i++) await a(i);
    await b(0);
    const all = await mine.listRecords();
    const newest = [...all].filter((r) => r.name === 'alpha').sort((x, y) => y.updatedAt - x.updatedAt || (x.key < y.key ? -1 : 1));
    const got = await mine.listRecent({ name: 'alpha', limit: 2 });
    expect(got.matched).toBe(5);
    expect(got.records.map((r) => r.key)).toEqual(newest.slice(0, 2).map((r) => r.key));
    expect(got.records.every((r) => r.result === undefined)).toBe(true);
    const full = await mine.listRecent({ name: 'beta', withResults: true });
    expect(full.records.map((r) => r.result)).toEqual([{ n: 0 }]);
    const later = await mine.listRecent({ updatedSince: Math.max(...all.map((r) => r.updatedAt)) + 1 });
    expect(later).toEqual({ records: [], matched: 0 });
    expect((await mine.listRecent({ status: 'failed' })).matched).toBe(0);
    await mine.close();
  });
});
