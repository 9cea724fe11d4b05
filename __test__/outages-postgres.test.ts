// A private PostgreSQL server stopped and restarted under a running process: calls fail
// with StoreError while it is down (fn never runs without a record), and the same store
// carries on once it is back.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { lib } from './helpers';
import { PgServer } from './postgres-server';

let server: PgServer;
beforeAll(async () => {
  server = await PgServer.start();
});
afterAll(() => server?.stop());

describe('PostgresStore across a server outage', () => {
  it('StoreError while the server is down, nothing runs unrecorded, and the same process recovers', async () => {
    const store = new lib.PostgresStore({ url: server.url, table: 'outage', connectTimeoutMs: 500, commandTimeoutMs: 1000 });
    const ran: string[] = [];
    let stopMidCall = false;
    const send = lib.idempotent(async function send(to: string) {
      ran.push(to);
      if (stopMidCall) {
        stopMidCall = false;
        server.halt(); // the side effect happened; its completion cannot be written
      }
      return { sent: to };
    }, { store, leaseMs: 1000 });

    expect(await send('a')).toEqual({ sent: 'a' });

    // Down mid-call: fn ran, complete cannot be recorded: StoreError, never a silent success.
    stopMidCall = true;
    await expect(send('b')).rejects.toBeInstanceOf(lib.StoreError);
    expect(ran).toEqual(['a', 'b']);

    // Down: every call is a StoreError and fn does not run.
    for (const to of ['c', 'd']) {
      const err = await send(to).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(lib.StoreError);
      expect((err as Error).message).toContain(`127.0.0.1:${server.port}`);
    }
    expect(ran).toEqual(['a', 'b']);

    server.begin();
    // The same store, the same process: it reconnects by itself.
    expect(await send('c')).toEqual({ sent: 'c' });
    expect(await send('a')).toEqual({ sent: 'a' }); // a replay: the completion survived
    // 'b' ran but was not recorded as completed: it is pending, and runs again only after its lease.
    const b = await store.get(send.keyFor('b'));
    expect(b?.status).toBe('pending');
    expect(ran).toEqual(['a', 'b', 'c']);
    // Every run has its record.
    for (const to of ran) expect(await store.get(send.keyFor(to))).not.toBeNull();
    await store.close();
  });
});
