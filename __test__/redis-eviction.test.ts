// A Redis that may evict this store's records (a memory limit and a maxmemory-policy other
// than noeviction) is a Redis where a completed call can run again: every claim, and every
// record with ttlMs, carries an expiry, so even the volatile-* policies take them. The store
// asks the server (INFO memory) on its first call and warns once per server; it does not
// refuse (a server with room to spare never evicts), and the call does not wait for it.
// Both transports: the one on Node's event loop (the check goes on the calls' own
// connection) and the Tokio one (Bun, Deno).

import { afterAll, describe, expect, it } from 'vitest';

import { lib, transports } from './helpers';
import { RedisServer, uniquePrefix } from './redis-server';

const { idempotent, RedisStore } = lib;
type Options = ConstructorParameters<typeof RedisStore>[0];

const { EVICTION_CHECK } = require('../dist/stores/redis-store.js') as { EVICTION_CHECK: symbol };

const servers: RedisServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.kill();
});

async function server(args: string[]): Promise<RedisServer> {
  const s = await RedisServer.start(args);
  servers.push(s);
  return s;
}

/** One call through a new store on `url`; the warnings emitted while its check ran, and what the check said. */
async function firstCall(url: string, open: (o: Options) => InstanceType<typeof RedisStore>) {
  const warnings: Error[] = [];
  const listener = (w: Error) => warnings.push(w);
  process.on('warning', listener);
  const store = open({ url, prefix: uniquePrefix() });
  try {
    const charge = idempotent(async (n: number) => ({ charged: n }), { store, name: 'charge' });
    expect(await charge(1)).toEqual({ charged: 1 });
    const said = await (store as unknown as Record<symbol, Promise<string | null>>)[EVICTION_CHECK];
    // process.emitWarning delivers on the next tick.
    await new Promise((r) => process.nextTick(r));
    return { said, warnings: warnings.filter((w) => (w as { code?: string }).code === 'IDEMPOTENT_TOOLS_REDIS_EVICTION') };
  } finally {
    process.off('warning', listener);
    await store.close();
  }
}

describe.each(transports)('RedisStore (%s) on a server that may evict its records', (_, open) => {
  for (const policy of ['allkeys-lru', 'volatile-lru', 'volatile-ttl']) {
    it(`maxmemory 64mb, ${policy}: warns once per server, naming the policy and what to do`, async () => {
      const s = await server(['--maxmemory', '64mb', '--maxmemory-policy', policy]);
      const first = await firstCall(s.url, open);
      expect(first.said).toMatch(new RegExp(`maxmemory-policy ${policy}, maxmemory 67108864 bytes`));
      expect(first.said).toMatch(/completed call that runs again.*noeviction/);
      expect(first.warnings.map((w) => w.message)).toEqual([first.said]);
      // Another store on the same server: the check says it again, the process is not told twice.
      const second = await firstCall(s.url, open);
      expect(second.said).toBe(first.said);
      expect(second.warnings).toEqual([]);
    });
  }

  it('maxmemory 64mb, noeviction: no warning (a full server fails calls instead)', async () => {
    const s = await server(['--maxmemory', '64mb', '--maxmemory-policy', 'noeviction']);
    const r = await firstCall(s.url, open);
    expect(r.said).toBeNull();
    expect(r.warnings).toEqual([]);
  });

  it('no memory limit, allkeys-lru: no warning (nothing is ever evicted)', async () => {
    const s = await server(['--maxmemory', '0', '--maxmemory-policy', 'allkeys-lru']);
    const r = await firstCall(s.url, open);
    expect(r.said).toBeNull();
    expect(r.warnings).toEqual([]);
  });
});
