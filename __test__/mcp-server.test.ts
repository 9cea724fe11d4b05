// idempotent-tools/mcp-server: a server's own write tools, with the official SDK client over
// stdio and over Streamable HTTP (two accounts), the server a real child process.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';

import { ROOT, lineFrom, tempDir } from './helpers';
import { until } from './mcp-helpers';

const SERVER = join(ROOT, '__test__', 'fixtures', 'mcp-server-payments.mjs');
const closers: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

function charges(log: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
}

async function stdioClient() {
  const dir = tempDir();
  const log = join(dir, 'charges.log');
  const transport = new StdioClientTransport({ command: process.execPath, args: [SERVER, 'stdio', join(dir, 'store.db'), log], stderr: 'pipe', cwd: ROOT });
  let stderr = '';
  transport.stderr!.on('data', (d) => (stderr += d));
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(transport);
  closers.push(() => client.close());
  return { client, log, stderr: () => stderr };
}

/** A raw tools/call, with params the SDK's callTool does not send (a top-level idempotencyKey). */
function call(client: Client, params: Record<string, unknown>, options?: { signal?: AbortSignal }) {
  return client.request({ method: 'tools/call', params: params as never }, CallToolResultSchema, options);
}

describe('idempotent-tools/mcp-server over stdio', () => {
  it('a repeated call replays the first result (marked in _meta); read-only tools run each time', async () => {
    const { client, log } = await stdioClient();
    const args = { orderId: 'o-42', cents: 1999 };
    const first = await client.callTool({ name: 'send_payment', arguments: args });
    const again = await client.callTool({ name: 'send_payment', arguments: { cents: 1999, orderId: 'o-42' } });
    expect(charges(log)).toEqual(['local o-42 1999']);
    expect(first._meta?.['idempotent-tools/replayed']).toBeUndefined();
    const { _meta, ...replayed } = again;
    expect(_meta).toEqual({ 'idempotent-tools/replayed': true });
    expect(replayed).toEqual(first);
    await client.callTool({ name: 'balance', arguments: {} });
    await client.callTool({ name: 'balance', arguments: {} });
    expect(charges(log).filter((l) => l === 'balance')).toHaveLength(2);
  });

  it("a client's key (every spelling the proxy reads) names the call; the same key with other arguments is the proxy's error", async () => {
    const { client, log } = await stdioClient();
    await call(client, { name: 'send_payment', arguments: { orderId: 'o-1', cents: 100 }, _meta: { idempotencyKey: 'k-1' } });
    await call(client, { name: 'send_payment', arguments: { orderId: 'o-1', cents: 100 }, idempotencyKey: 'k-1' });
    expect(charges(log)).toEqual(['local o-1 100']);
    const refused = call(client, { name: 'send_payment', arguments: { orderId: 'o-1', cents: 999 }, _meta: { 'idempotency-key': 'k-1' } });
    await expect(refused).rejects.toMatchObject({ code: -32010, data: { 'idempotent-tools': 'KEY_MISMATCH' } });
    // A number is never a key; a number a double cannot keep is never keyed.
    await expect(call(client, { name: 'send_payment', arguments: { orderId: 'o-2', cents: 1 }, _meta: { idempotencyKey: 7 } })).rejects.toMatchObject({ code: -32602 });
    await expect(call(client, { name: 'send_payment', arguments: { orderId: 'o-3', cents: 1790000000000000001 } })).rejects.toMatchObject({ code: -32602, message: expect.stringMatching(/beyond ±2\^53/) });
    expect(charges(log)).toEqual(['local o-1 100']);
  });

  it('a client that cancels and retries: the call finishes, and the retry joins it (one charge)', async () => {
    const { client, log, stderr } = await stdioClient();
    const abort = new AbortController();
    const first = call(client, { name: 'slow_payment', arguments: { orderId: 'o-9' } }, { signal: abort.signal });
    await until(() => stderr().includes('started o-9'), 'the slow payment to start');
    abort.abort();
    await expect(first).rejects.toThrow();
    const retry = call(client, { name: 'slow_payment', arguments: { orderId: 'o-9' } });
    await client.callTool({ name: 'release', arguments: {} });
    const result = await retry;
    expect(JSON.stringify(result.content)).toContain('charged o-9 slowly');
    expect(charges(log)).toEqual(['slow o-9']);
  });

  it('tools registered after idempotentServer(), and a handler wrapped with idempotentTool, are guarded', async () => {
    const { client, log } = await stdioClient();
    await client.callTool({ name: 'refund', arguments: { orderId: 'o-5' } });
    const again = await client.callTool({ name: 'refund', arguments: { orderId: 'o-5' } });
    expect(charges(log)).toEqual(['refund o-5']);
    expect(again._meta?.['idempotent-tools/replayed']).toBe(true);
  });
});

describe('idempotent-tools/mcp-server over Streamable HTTP, two accounts', () => {
  async function httpServer() {
    const dir = tempDir();
    const log = join(dir, 'charges.log');
    const child = spawn(process.execPath, [SERVER, 'http', join(dir, 'store.db'), log], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    closers.push(() => void child.kill());
    const port = Number((await lineFrom(child, /^listening \d+/)).split(' ')[1]);
    const clientOf = async (token: string) => {
      const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
      const client = new Client({ name: 'test', version: '1.0.0' });
      await client.connect(transport);
      closers.unshift(() => client.close());
      return client;
    };
    return { log, clientOf };
  }

  it("each account's calls are its own: the same call by two accounts runs twice, a repeat replays; one account's key is not another's", async () => {
    const { log, clientOf } = await httpServer();
    const alice = await clientOf('token-alice');
    const bob = await clientOf('token-bob');
    const args = { orderId: 'o-42', cents: 1999 };
    await alice.callTool({ name: 'send_payment', arguments: args });
    await bob.callTool({ name: 'send_payment', arguments: args });
    const again = await alice.callTool({ name: 'send_payment', arguments: args });
    expect(again._meta?.['idempotent-tools/replayed']).toBe(true);
    expect(JSON.stringify(again.content)).toContain('for alice');
    expect(charges(log).sort()).toEqual(['alice o-42 1999', 'bob o-42 1999']);
    // The same client key, sent by both: two calls, each account's own.
    await call(alice, { name: 'send_payment', arguments: { orderId: 'o-7', cents: 1 }, _meta: { idempotencyKey: 'shared-key' } });
    const bobs = await call(bob, { name: 'send_payment', arguments: { orderId: 'o-7', cents: 2 }, _meta: { idempotencyKey: 'shared-key' } });
    expect(JSON.stringify(bobs.content)).toContain('for bob');
    await expect(call(alice, { name: 'send_payment', arguments: { orderId: 'o-7', cents: 3 }, _meta: { idempotencyKey: 'shared-key' } })).rejects.toMatchObject({
      code: -32010,
      data: { 'idempotent-tools': 'KEY_MISMATCH' },
    });
    expect(charges(log).filter((l) => l.includes('o-7')).sort()).toEqual(['alice o-7 1', 'bob o-7 2']);
  });
});
