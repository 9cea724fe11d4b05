/**
 * The inspector page (`idempotent-tools ui`, or `serveInspector` from
 * `idempotent-tools/ui` inside an application): a node:http server on 127.0.0.1 only,
 * behind a random token that is part of the printed URL, as Jupyter does. It reads and
 * changes records only through the store interface (`listRecords`, `get`, `release`,
 * `clear`). The page is plain HTML, CSS and JavaScript from ./assets, no build step.
 *
 * Every request must carry the token (`?token=` or the `x-inspector-token` header) and
 * a Host header naming 127.0.0.1 or localhost at this port (so that a web page in the
 * user's browser cannot reach it through DNS rebinding); anything else is a 403.
 */

import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

import { EventLog, buildTimeline } from './timeline.js';
import { QueryError, findByKey, keyIdSecret, keyIdWith, matches, parseDecisionName, parseQuery, queryRecords, recentRecords, withKeyIds, type Store } from '../library.js';

export interface InspectorOptions {
  store: Store;
  /** What the page calls the store (a path or URL, no password). */
  where?: string;
  /** Default 0: any free port. */
  port?: number;
  /** At least 16 URL-safe characters (A-Z, a-z, 0-9, `_`, `-`). Default: 32 random bytes. */
  token?: string;
  /** Count replays and take-overs from this process's events (for a server inside the application). Default true. */
  liveEvents?: boolean;
}

export interface Inspector {
  /** The URL to open, token included. */
  url: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

const ASSETS = join(__dirname, '..', '..', '..', 'lib', 'apps', 'ui', 'assets');
const STATIC: Record<string, string> = {
  '/app.js': 'text/javascript; charset=utf-8',
  '/style.css': 'text/css; charset=utf-8',
};
const DEFAULT_WINDOW = '1h';
const DEFAULT_LIMIT = '200';
const MAX_BODY = 16 * 1024;

class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, {
    'content-type': type,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'",
  });
  res.end(body);
}

const json = (res: ServerResponse, status: number, value: unknown) => send(res, status, 'application/json; charset=utf-8', JSON.stringify(value));

async function body(req: IncomingMessage): Promise<Record<string, unknown>> {
  if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
    throw new HttpError(415, 'send JSON (content-type: application/json)');
  }
  let text = '';
  for await (const chunk of req) {
    text += chunk;
    if (text.length > MAX_BODY) throw new HttpError(413, 'request body too large');
  }
  try {
    const value = JSON.parse(text);
    if (value === null || typeof value !== 'object') throw new Error('not an object');
    return value;
  } catch {
    throw new HttpError(400, 'the body must be a JSON object such as {"key": "..."}');
  }
}

function sameToken(given: string | null | undefined, token: string): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** What a token may be: it goes into the URL and the page as it is, and must be hard to guess. */
const TOKEN = /^[A-Za-z0-9_-]{16,}$/;
const OPTIONS = new Set(['store', 'where', 'port', 'token', 'liveEvents']);

function checkOptions(options: InspectorOptions): void {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('serveInspector: options must be an object such as { store }');
  }
  for (const name of Object.keys(options)) {
    if (!OPTIONS.has(name)) throw new TypeError(`serveInspector: unknown option "${name}"; the options are ${[...OPTIONS].join(', ')}`);
  }
  const { store, where, port, token, liveEvents } = options;
  if (store === null || typeof store !== 'object' || typeof store.listRecords !== 'function') {
    throw new TypeError('serveInspector: store must be a store (such as new SqliteStore()), with listRecords()');
  }
  if (where !== undefined && typeof where !== 'string') throw new TypeError('serveInspector: where must be a string (what the page calls the store)');
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) {
    throw new TypeError(`serveInspector: port must be an integer from 0 (any free port) to 65535, not ${String(port)}`);
  }
  if (token !== undefined && (typeof token !== 'string' || !TOKEN.test(token))) {
    throw new TypeError(
      'serveInspector: token must be at least 16 URL-safe characters (A-Z, a-z, 0-9, _ and -); leave it out for a random one',
    );
  }
  if (liveEvents !== undefined && typeof liveEvents !== 'boolean') throw new TypeError('serveInspector: liveEvents must be a boolean');
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);

export async function serveInspector(options: InspectorOptions): Promise<Inspector> {
  checkOptions(options);
  const { store } = options;
  const where = options.where ?? 'the store';
  const token = options.token ?? randomBytes(32).toString('base64url');
  const log = options.liveEvents === false ? undefined : new EventLog();
  // Split and joined, never String.replace: a replacement string would read `$&` and the like.
  const page = readFileSync(join(ASSETS, 'index.html'), 'utf8').split('__TOKEN__').join(escapeHtml(token));
  let port = 0;

  const filters = (url: URL) => {
    const p = (k: string) => url.searchParams.get(k) ?? undefined;
    try {
      return parseQuery({ name: p('name'), status: p('status'), scope: p('scope'), key: p('key'), since: p('since'), limit: p('limit') });
    } catch (err) {
      if (err instanceof QueryError) throw new HttpError(400, err.message.replace(/^--/, ''));
      throw err;
    }
  };

  async function api(req: IncomingMessage, url: URL): Promise<unknown> {
    const route = `${req.method} ${url.pathname}`;
    switch (route) {
      case 'GET /api/records': {
        const q = filters(url);
        q.limit ??= Number(DEFAULT_LIMIT);
        const now = Date.now();
        // Without results: Details asks for one record's (/api/record) when it opens.
        const { records, matched } = await queryRecords(store, q, now, { withResults: false });
        // Each with its keyed id, the name events, traces and `mcp --log` give it.
        return { where, now, records: await withKeyIds(store, records), matched };
      }
      case 'GET /api/record': {
        const key = url.searchParams.get('key');
        if (key === null || key === '') throw new HttpError(400, 'give the whole key: /api/record?key=...');
        const record = await store.get(key);
        if (record === null) throw new HttpError(404, `no record with key ${key}`);
        return { record: (await withKeyIds(store, [record]))[0] };
      }
      case 'GET /api/timeline': {
        const q = filters(url);
        const now = Date.now();
        const windowMs = q.sinceMs ?? filters(new URL(`http://x/?since=${DEFAULT_WINDOW}`)).sinceMs!;
        // Every record of the tool (a replay in the window counts against a record changed
        // before it), without results.
        const { records: all } = await recentRecords(store, { name: q.name });
        const inScope = { ...q, sinceMs: undefined, limit: undefined, status: undefined };
        // Calls only: approval decisions (approvals.ts) are not executions.
        const picked = all.filter((r) => parseDecisionName(r.name) === undefined && matches(r, inScope, now));
        // Events name records by their keyed ids (under the store's secret): match on those.
        const secret = log === undefined ? null : await keyIdSecret(store, { create: false }).catch(() => null);
        const ids = new Set(secret === null ? [] : picked.map((r) => keyIdWith(secret, r.key)));
        return buildTimeline(picked, windowMs, now, log, (name, id) => ids.has(id) && (q.name === undefined || q.name === name));
      }
      case 'POST /api/release':
      case 'POST /api/clear': {
        const { key, reconcile } = await body(req);
        if (typeof key !== 'string' || key === '') throw new HttpError(400, 'give the whole key: {"key": "..."}');
        if (reconcile !== undefined && typeof reconcile !== 'boolean') {
          throw new HttpError(400, 'reconcile must be true (the default: the next call takes the claim over and asks reconcile) or false (the record becomes failed)');
        }
        // Only a whole key here: a page's button always knows it, and a prefix must never
        // release or delete a record that the person did not see.
        const found = await findByKey(store, key);
        if (!('found' in found) || found.found.key !== key) throw new HttpError(404, `no record with key ${key}`);
        if (url.pathname === '/api/clear') return { deleted: await store.clear(key) };
        if (store.release === undefined) throw new HttpError(501, 'this store cannot release records');
        if (!(await store.release(key, { reconcile: reconcile ?? true }))) {
          throw new HttpError(409, `the record ${key} is ${found.found.status}, not pending: there is nothing to release`);
        }
        return { released: key, reconcile: reconcile ?? true };
      }
      default:
        throw new HttpError(404, `no such endpoint: ${route}`);
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const host = req.headers.host ?? '';
    if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) {
      return send(res, 403, 'text/plain; charset=utf-8', 'Forbidden: open the page at the 127.0.0.1 URL the command printed.\n');
    }
    const url = new URL(req.url ?? '/', `http://${host}`);
    const given = url.searchParams.get('token') ?? (req.headers['x-inspector-token'] as string | undefined);
    if (!sameToken(given, token)) {
      return send(res, 403, 'text/plain; charset=utf-8', 'Forbidden: this page needs the token from the URL that `idempotent-tools ui` printed.\n');
    }
    if (url.pathname === '/' && req.method === 'GET') {
      return send(res, 200, 'text/html; charset=utf-8', page);
    }
    const type = STATIC[url.pathname];
    if (type !== undefined && req.method === 'GET') {
      return send(res, 200, type, readFileSync(join(ASSETS, url.pathname.slice(1)), 'utf8'));
    }
    try {
      json(res, 200, await api(req, url));
    } catch (err) {
      if (err instanceof HttpError) return json(res, err.status, { error: err.message });
      json(res, 500, { error: err instanceof Error ? err.message : String(err) });
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) json(res, 500, { error: String(err) });
    });
  });
  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', fail);
      done();
    });
  });
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    port,
    token,
    close: () =>
      new Promise<void>((done) => {
        log?.close();
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
