// The inspector page's server without a browser: token, Host check, API errors, and
// replays counted from live events when it runs inside the application.

import { request } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const ui: typeof import('../dist/ui/server.js') = require(join(ROOT, 'dist', 'ui', 'server.js'));

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
