// Issue 36 finding 8, on PostgreSQL: `prune()` deletes expired rows a batch (1000) at a
// time and goes on while a batch comes back full. A server, or a proxy in front of it,
// that always says a DELETE removed a full batch kept prune() going forever (the CLI's
// `prune`, the MCP proxy's retention). Here a proxy in front of the real server rewrites
// every DELETE's command tag to "DELETE 1000" (and another one to more than a batch
// holds); prune() must end in a StoreError that says so, and the store's own periodic
// passes, which run back to back while they come back full, must pause.
//
// The proxy counts the DELETEs it rewrote: past OVERRUN it closes the connection, so a
// prune that does not end by itself fails the test instead of running forever.

import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

import { lib } from './helpers';
import { PG_URL, dropTables, uniqueTable } from './postgres-server';

const OVERRUN = 50_000;

interface Proxy {
  url: string;
  deletes: () => number;
  overrun: () => boolean;
  close: () => void;
}

/**
 * A TCP proxy to the test server that passes everything on, except that each
 * CommandComplete of a DELETE (backend message 'C', tag "DELETE n") says `tag` instead.
 */
async function rewritingProxy(tag: string): Promise<Proxy> {
  const target = new URL(PG_URL);
  let deletes = 0;
  let overrun = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    // The backend's messages: a type byte and a length (which counts itself, not the type).
    let buf = Buffer.alloc(0);
    upstream.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const out: Buffer[] = [];
      while (buf.length >= 5) {
        const len = buf.readInt32BE(1);
        if (buf.length < 1 + len) break;
        const message = buf.subarray(0, 1 + len);
        buf = buf.subarray(1 + len);
        if (message[0] === 0x43 && message.subarray(5).toString('latin1').startsWith('DELETE ')) {
          if (++deletes > OVERRUN) {
            overrun = true;
            client.destroy();
            return;
          }
          const body = Buffer.from(`${tag}\0`, 'latin1');
          const head = Buffer.alloc(5);
          head[0] = 0x43;
          head.writeInt32BE(4 + body.length, 1);
          out.push(head, body);
        } else {
          out.push(message);
        }
      }
      if (out.length > 0) client.write(Buffer.concat(out));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  const url = new URL(PG_URL);
  url.host = `127.0.0.1:${port}`;
  url.searchParams.set('sslmode', 'disable');
  return {
    url: url.href,
    deletes: () => deletes,
    overrun: () => overrun,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

let proxies: Proxy[] = [];
afterEach(() => {
  for (const p of proxies) p.close();
  proxies = [];
});
afterAll(() => dropTables());

async function pruneThrough(tag: string) {
  const table = uniqueTable();
  // The table, made directly: the proxy rewrites nothing a store's setup says.
  const setup = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
  await setup.migrate();
  await setup.close();
  const proxy = await rewritingProxy(tag);
  proxies.push(proxy);
  const store = new lib.PostgresStore({ url: proxy.url, table, pruneIntervalMs: 0 });
  try {
    const outcome = await store.prune().then(
      (value) => ({ value }),
      (e: Error) => ({ name: e.name, message: e.message }),
    );
    return { outcome, proxy };
  } finally {
    await store.close().catch(() => {});
  }
}

describe('PostgresStore.prune() against a server that never reports a short batch', () => {
  it('always a full batch: a StoreError after a bounded number of batches', async () => {
    const { outcome, proxy } = await pruneThrough('DELETE 1000');
    // Before: prune went on until the proxy cut it off, so its error was a lost connection.
    expect(proxy.overrun()).toBe(false);
    expect(outcome).toMatchObject({ name: 'StoreError' });
    expect((outcome as { message: string }).message).toMatch(
      /prune stopped after 10000 full batches \(10000000 rows\).*broken or hostile server, or a proxy in front of it/,
    );
    expect(proxy.deletes()).toBe(10_000);
  });

  it("the store's own passes: back to back at most 10,000 times, then the interval", async () => {
    const table = uniqueTable();
    const setup = new lib.PostgresStore({ url: PG_URL, table, pruneIntervalMs: 0 });
    await setup.migrate();
    await setup.close();
    const proxy = await rewritingProxy('DELETE 1000');
    proxies.push(proxy);
    // An hour between passes that are not full: the back-to-back run is all there is.
    const store = new lib.PostgresStore({ url: proxy.url, table, pruneIntervalMs: 3_600_000 });
    try {
      while (proxy.deletes() < 10_000 && !proxy.overrun()) await store.get('a key');
      // Passes go one after another, each on the heels of the last: were there no bound,
      // the next ones would be sent beside these reads.
      for (let i = 0; i < 3; i++) await store.get('a key');
      // Before: back to back until the proxy cut it off.
      expect(proxy.overrun()).toBe(false);
      expect(proxy.deletes()).toBe(10_000);
    } finally {
      await store.close();
    }
  });

  it('more rows than a batch deletes: a StoreError at once', async () => {
    const { outcome, proxy } = await pruneThrough('DELETE 5000');
    expect(proxy.overrun()).toBe(false);
    expect(outcome).toMatchObject({ name: 'StoreError' });
    expect((outcome as { message: string }).message).toMatch(/the server says a batch of prune deleted 5000 rows, more than the 1000 it asks for/);
    expect(proxy.deletes()).toBe(1);
  });
});
