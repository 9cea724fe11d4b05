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
