// A RedisStore sends nothing of a call's before its connection's handshake (AUTH, SELECT,
// the client's name) has been answered: when the server refuses the handshake (a database
// it does not have, an ACL user without +select, a wrong password), the call fails with a
// StoreError that says what was refused, and no key is left anywhere on the server. Both
// transports: the one on Node's event loop (src/redis_store/on_loop/) and the Tokio one
// (redis-rs), which the store uses where that loop is not Node's (Bun, Deno).

import { afterAll, describe, expect, it } from 'vitest';

import { lib, transports } from './helpers';
import { RedisServer, redisCommand, uniquePrefix } from './redis-server';

const { idempotent, RedisStore, StoreError } = lib;

const servers: RedisServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.kill();
});


/** Every database's key count, from INFO keyspace ("" when no database holds a key). */
async function keyspace(port: number): Promise<string> {
  const info = await redisCommand(port, 'INFO keyspace');
  return info.split('\r\n').filter((l) => /^db\d+:/.test(l)).join(' ');
}

describe.each(transports)('RedisStore %s: nothing before the handshake', (_, makeStore) => {
  async function refused(port: number, url: string, pattern: RegExp) {
    const store = makeStore({ url, prefix: uniquePrefix(), connectTimeoutMs: 2000, commandTimeoutMs: 2000 });
    let runs = 0;
    const op = idempotent(async function op(n: number) { runs++; return n; }, { store });
    try {
      // Twice: a refused handshake is not remembered as a working connection.
      const errors: unknown[] = [];
      for (const n of [1, 2]) errors.push(await op(n).then(() => undefined, (e: unknown) => e));
      expect(runs).toBe(0);
      expect(await keyspace(port)).toBe('');
      for (const err of errors) {
        expect(err).toBeInstanceOf(StoreError);
        expect((err as Error).message).toMatch(pattern);
      }
    } finally {
      await store.close();
    }
  }

  it('a database the server does not have (/99 of 16): a StoreError saying so, and no key on any database', async () => {
    const s = await RedisServer.start(['--databases', '16']);
    servers.push(s);
    await refused(s.port, `${s.url}/99`, /SELECT 99.*DB index is out of range.*databases/s);
    // The same server, a database it has: the call runs.
    const store = makeStore({ url: `${s.url}/15`, prefix: uniquePrefix() });
    const op = idempotent(async function op(n: number) { return n; }, { store });
    expect(await op(3)).toBe(3);
    await store.close();
    expect(await keyspace(s.port)).toMatch(/^db15:keys=1,/);
  });

  it('an ACL user without +select: a StoreError naming the permission, and no key written', async () => {
    const s = await RedisServer.start();
    servers.push(s);
    expect(await redisCommand(s.port, 'ACL SETUSER noselect on >secret-pw ~* &* +@all -select')).toBe('+OK');
    await refused(s.port, `redis://noselect:secret-pw@127.0.0.1:${s.port}/2`, /SELECT 2.*NOPERM.*\+select/s);
  });

  it('a wrong password while the default user needs none: a StoreError, and nothing runs as the default user', async () => {
    const s = await RedisServer.start();
    servers.push(s);
    expect(await redisCommand(s.port, 'ACL SETUSER someone on >right-pw ~* &* +@all')).toBe('+OK');
    await refused(s.port, `redis://someone:wrong-pw@127.0.0.1:${s.port}`, /authentication failed|WRONGPASS/i);
  });
});
