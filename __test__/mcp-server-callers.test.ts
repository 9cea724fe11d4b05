// idempotent-tools/mcp-server: who is calling (issue 36, findings 1 and 2). The official SDK
// client and server over the SDK's in-process transport, one McpServer per session as a
// multi-user backend builds them; bearer auth as a token verifier hands it over
// (`authInfo`), with and without a subject.

import { createRequire } from 'node:module';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentServer, idempotentTool }: typeof import('../dist/integrations/mcp-server.js') = require(`${ROOT}/dist/integrations/mcp-server.js`);
const { SqliteStore } = lib;

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

type Charges = string[];

/** One user's session: its own McpServer (as a multi-user backend makes one per session), on an in-process transport. */
async function session(store: InstanceType<typeof SqliteStore>, charges: Charges, who: string, options: Parameters<typeof idempotentServer>[1] = {}, auth?: () => AuthInfo) {
  const server = new McpServer({ name: 'payments', version: '1.0.0' });
  server.registerTool('send_payment', { inputSchema: { orderId: z.string(), cents: z.number() } }, async ({ orderId, cents }) => {
    charges.push(`${who} ${orderId} ${cents}`);
    return { content: [{ type: 'text', text: `charged ${orderId} ${cents} for ${who}` }] };
  });
  idempotentServer(server, { store, ...options });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  if (auth !== undefined) {
    // What a transport behind bearer auth hands the server with every message: the verified token.
    const send = clientSide.send.bind(clientSide);
    clientSide.send = (message, opts) => send(message, { ...opts, authInfo: auth() });
  }
  await server.connect(serverSide);
  const client = new Client({ name: `client-${who}`, version: '1.0.0' });
  await client.connect(clientSide);
  closers.push(() => client.close());
  return client;
}

function pay(client: Client, args: Record<string, unknown>, key?: string) {
  return client.request(
    { method: 'tools/call', params: { name: 'send_payment', arguments: args, ...(key === undefined ? {} : { _meta: { idempotencyKey: key } }) } },
    CallToolResultSchema,
  );
}

describe('mcp-server: who is calling', () => {
  it('two users on in-process transports with the same arguments: refused, naming "scope" (never one record for both)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: Charges = [];
    const alice = await session(store, charges, 'alice');
    const bob = await session(store, charges, 'bob');
    const args = { orderId: 'o-1', cents: 100 };
    await expect(pay(alice, args)).rejects.toMatchObject({ message: expect.stringMatching(/"scope" option/), data: { 'idempotent-tools': 'CANNOT_TELL' } });
    await expect(pay(bob, args)).rejects.toMatchObject({ message: expect.stringMatching(/"scope" option/) });
    expect(charges).toEqual([]);
  });

  it('with a "scope" per session, each user runs once and replays their own result', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: Charges = [];
    const alice = await session(store, charges, 'alice', { scope: 'account-alice' });
    const bob = await session(store, charges, 'bob', { scope: 'account-bob' });
    const args = { orderId: 'o-1', cents: 100 };
    await pay(alice, args);
    const bobs = await pay(bob, args);
    const again = await pay(bob, args);
    expect(JSON.stringify(bobs.content)).toContain('for bob');
    expect(again).toMatchObject({ content: bobs.content, _meta: { 'idempotent-tools/replayed': true } });
    expect(charges.sort()).toEqual(['alice o-1 100', 'bob o-1 100']);
  });

  it('bearer auth without a subject: refused, naming "scope" (a token digest would run a call twice across a refresh)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: Charges = [];
    let token = 'access-1';
    const client = await session(store, charges, 'carol', {}, () => ({ token, clientId: 'app', scopes: [] }));
    await expect(pay(client, { orderId: 'o-2', cents: 5 }, 'k-1')).rejects.toMatchObject({ message: expect.stringMatching(/no extra\.sub.*"scope" option/s) });
    token = 'access-2';
    await expect(pay(client, { orderId: 'o-2', cents: 5 }, 'k-1')).rejects.toThrow(/"scope" option/);
    expect(charges).toEqual([]);
  });

  it('bearer auth with a subject: a refreshed token retrying with the same key replays; another subject runs its own', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: Charges = [];
    let token = 'access-1';
    let sub = 'user-dana';
    const client = await session(store, charges, 'dana', {}, () => ({ token, clientId: 'app', scopes: [], extra: { sub } }));
    const first = await pay(client, { orderId: 'o-3', cents: 7 }, 'k-9');
    token = 'access-2'; // refreshed
    const retry = await pay(client, { orderId: 'o-3', cents: 7 }, 'k-9');
    expect(retry).toMatchObject({ content: first.content, _meta: { 'idempotent-tools/replayed': true } });
    sub = 'user-erin'; // another account sending the same key and arguments
    const other = await pay(client, { orderId: 'o-3', cents: 7 }, 'k-9');
    expect(other._meta?.['idempotent-tools/replayed']).toBeUndefined();
    expect(charges).toEqual(['dana o-3 7', 'dana o-3 7']);
  });

  it('idempotentTool alone cannot see its transport: without a "scope" it refuses; with one it guards', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: Charges = [];
    const server = new McpServer({ name: 'payments', version: '1.0.0' });
    server.registerTool('refund', { inputSchema: { orderId: z.string() } }, idempotentTool(async ({ orderId }: { orderId: string }) => {
      charges.push(`refund ${orderId}`);
      return { content: [{ type: 'text' as const, text: `refunded ${orderId}` }] };
    }, { name: 'refund', store }));
    server.registerTool('refund_scoped', { inputSchema: { orderId: z.string() } }, idempotentTool(async ({ orderId }: { orderId: string }) => {
      charges.push(`scoped ${orderId}`);
      return { content: [{ type: 'text' as const, text: `refunded ${orderId}` }] };
    }, { name: 'refund_scoped', store, scope: 'local' }));
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 'c', version: '1.0.0' });
    await client.connect(clientSide);
    closers.push(() => client.close());
    const refused = await client.callTool({ name: 'refund', arguments: { orderId: 'o-4' } });
    expect(refused).toMatchObject({ isError: true });
    expect(JSON.stringify(refused.content)).toMatch(/\\"scope\\" option/);
    await client.callTool({ name: 'refund_scoped', arguments: { orderId: 'o-4' } });
    const again = await client.callTool({ name: 'refund_scoped', arguments: { orderId: 'o-4' } });
    expect(again._meta?.['idempotent-tools/replayed']).toBe(true);
    expect(charges).toEqual(['scoped o-4']);
  });
});
