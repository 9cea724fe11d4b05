// The MCP key shape of SEP-3182, "Request Idempotency" (modelcontextprotocol/modelcontextprotocol
// pull 3182), on both MCP surfaces: idempotent-tools/mcp-server and the proxy (issue 36,
// finding 10). The proposal reads `params.idempotencyKey` (both already did) and fixes how a
// refusal looks, so that a client written for it understands them:
// - the same key with other arguments: `error.data = { type: "idempotency_key_conflict", idempotencyKey }`;
// - a duplicate still running, when the server does not wait for it:
//   `{ type: "idempotency_key_in_progress", idempotencyKey }`;
// - arguments compared as parsed JSON: key order, `1` and `1.0`, `"é"` and `"\u00e9"` are one
//   call; and, our own rule, no two different numbers are one key (9007199254740993 and
//   9007199254740992 are two);
// - the `tools.idempotency` capability.
// Our own error code (-32010) and `data["idempotent-tools"]` stay. Tested with the real MCP
// SDK client over stdio (numbers written as raw JSON text on the wire) and over the SDK's
// in-process transport.

import { createRequire } from 'node:module';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolResultSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb, tempDir } from './helpers';
import { CLI, COUNTING, count, text, until } from './mcp-helpers';

const require = createRequire(import.meta.url);
const mcpServer: typeof import('../dist/integrations/mcp-server.js') = require(`${ROOT}/dist/integrations/mcp-server.js`);

const PAYMENTS = join(ROOT, '__test__', 'fixtures', 'mcp-server-payments.mjs');
const closers: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** What every message from the server was, as it came off the wire (before the SDK's schemas). */
function recording(transport: Transport): JSONRPCMessage[] {
  const seen: JSONRPCMessage[] = [];
  // The SDK's Protocol calls a handler set before connect() first, then its own.
  transport.onmessage = (message) => void seen.push(message);
  return seen;
}

/** The capabilities the server declared in its initialize result, as sent. */
function declared(seen: JSONRPCMessage[]): Record<string, unknown> {
  const init = seen.find((m) => 'result' in m && (m.result as { protocolVersion?: unknown }).protocolVersion !== undefined) as { result: { capabilities: Record<string, unknown> } };
  return init.result.capabilities;
}

/** A value written on the wire as `json`, JSON text the SDK would never write (`1.0`, `9007199254740993`, `"\u00e9"`). */
const raw = (json: string) => `RAW:${Buffer.from(json).toString('hex')}`;

/** A stdio client whose requests carry `raw(...)` values as the JSON text they stand for. */
async function stdioClient(command: string[], env: Record<string, string> = {}) {
  const transport = new StdioClientTransport({ command: command[0], args: command.slice(1), env: { ...(process.env as Record<string, string>), ...env }, stderr: 'pipe', cwd: ROOT });
  let stderr = '';
  transport.stderr!.on('data', (d) => (stderr += d));
  const seen = recording(transport);
  const child = () => (transport as unknown as { _process?: { stdin: NodeJS.WritableStream } })._process;
  transport.send = (message) =>
    new Promise((resolve) => {
      const line = JSON.stringify(message).replace(/"RAW:([0-9a-f]*)"/g, (_, hex: string) => Buffer.from(hex, 'hex').toString()) + '\n';
      if (child()!.stdin.write(line)) resolve();
      else child()!.stdin.once('drain', resolve);
    });
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(transport);
  closers.push(() => client.close());
  return { client, seen, stderr: () => stderr };
}

function call(client: Client, params: Record<string, unknown>) {
  return client.request({ method: 'tools/call', params: params as never }, CallToolResultSchema, { timeout: 120_000 });
}

const conflict = (idempotencyKey: string) => ({
  code: -32010,
  data: { 'idempotent-tools': 'KEY_MISMATCH', type: 'idempotency_key_conflict', idempotencyKey },
});

describe('mcp-server (idempotentServer), the official client over stdio', () => {
  async function payments() {
    const dir = tempDir();
    return stdioClient([process.execPath, PAYMENTS, 'stdio', join(dir, 'store.db'), join(dir, 'charges.log')]);
  }

  it('declares the tools.idempotency capability', async () => {
    const { seen } = await payments();
    expect(declared(seen).tools).toMatchObject({ idempotency: {} });
  });

  it("the same key with other arguments (or another tool) is refused in SEP-3182's shape, our code and fields kept", async () => {
    const { client } = await payments();
    await call(client, { name: 'send_payment', arguments: { orderId: 'o-1', cents: 100 }, idempotencyKey: 'k-1' });
    await expect(call(client, { name: 'send_payment', arguments: { orderId: 'o-1', cents: 999 }, idempotencyKey: 'k-1' })).rejects.toMatchObject(conflict('k-1'));
    await expect(call(client, { name: 'refund', arguments: { orderId: 'o-1' }, idempotencyKey: 'k-1' })).rejects.toMatchObject(conflict('k-1'));
    // A key in _meta is the same key, and answered the same way.
    await expect(call(client, { name: 'send_payment', arguments: { orderId: 'o-1', cents: 5 }, _meta: { idempotencyKey: 'k-1' } })).rejects.toMatchObject(conflict('k-1'));
  });

  it('arguments are compared as parsed JSON: key order, 1 and 1.0, a character and its \\u escape are one call; numbers a double cannot keep are refused, never one key', async () => {
    const { client } = await payments();
    const first = await call(client, { name: 'send_payment', arguments: { orderId: 'o-é', cents: 1 }, idempotencyKey: 'k-2' });
    for (const args of [
      { cents: raw('1.0'), orderId: 'o-é' },
      { orderId: raw('"o-\\u00e9"'), cents: raw('1e0') },
    ]) {
      const again = await call(client, { name: 'send_payment', arguments: args, idempotencyKey: 'k-2' });
      expect(again._meta?.['idempotent-tools/replayed']).toBe(true);
      expect(again.content).toEqual(first.content);
    }
    for (const cents of [raw('9007199254740993'), raw('9007199254740992')]) {
      await expect(call(client, { name: 'send_payment', arguments: { orderId: 'o-big', cents }, idempotencyKey: 'k-3' })).rejects.toMatchObject({ code: -32602 });
    }
  });
});

describe("mcp-server on the MCP SDK's in-process transport", () => {
  async function inProcess(options: Record<string, unknown>) {
    const store = new lib.SqliteStore({ path: tempDb() });
    closers.push(() => store.close());
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const startedP = new Promise<void>((r) => (started = r));
    const server = new McpServer({ name: 'payments', version: '1.0.0' });
    server.registerTool('slow_payment', { inputSchema: { orderId: z.string() } }, async ({ orderId }) => {
      started();
      await released;
      return { content: [{ type: 'text' as const, text: `charged ${orderId}` }] };
    });
    mcpServer.idempotentServer(server, { store, scope: 'account-1', ...options });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const seen = recording(clientSide);
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(clientSide);
    closers.push(() => client.close());
    return { client, seen, release, started: startedP };
  }

  it('declares tools.idempotency; a duplicate in flight, when the server does not wait (onDuplicate: "raise"), is idempotency_key_in_progress at once', async () => {
    const s = await inProcess({ onDuplicate: 'raise' });
    expect(declared(s.seen).tools).toMatchObject({ idempotency: {} });
    const first = call(s.client, { name: 'slow_payment', arguments: { orderId: 'o-1' }, idempotencyKey: 'k-9' });
    await s.started;
    await expect(call(s.client, { name: 'slow_payment', arguments: { orderId: 'o-1' }, idempotencyKey: 'k-9' })).rejects.toMatchObject({
      code: -32010,
      data: { 'idempotent-tools': 'DUPLICATE_IN_FLIGHT', type: 'idempotency_key_in_progress', idempotencyKey: 'k-9' },
    });
    s.release();
    expect(text(await first)).toBe('charged o-1');
  });

  it('a duplicate that waited its pollTimeoutMs is idempotency_key_in_progress too; the same key with other arguments is idempotency_key_conflict', async () => {
    const s = await inProcess({ pollTimeoutMs: 50 });
    const first = call(s.client, { name: 'slow_payment', arguments: { orderId: 'o-2' }, idempotencyKey: 'k-10' });
    await s.started;
    await expect(call(s.client, { name: 'slow_payment', arguments: { orderId: 'o-2' }, idempotencyKey: 'k-10' })).rejects.toMatchObject({
      code: -32010,
      data: { 'idempotent-tools': 'IN_FLIGHT_TIMEOUT', type: 'idempotency_key_in_progress', idempotencyKey: 'k-10' },
    });
    s.release();
    await first;
    await expect(call(s.client, { name: 'slow_payment', arguments: { orderId: 'o-3' }, idempotencyKey: 'k-10' })).rejects.toMatchObject(conflict('k-10'));
  });

  it('"onDuplicate" takes "block" or "raise"', () => {
    expect(() => mcpServer.idempotentServer(new McpServer({ name: 'x', version: '1' }), { onDuplicate: 'retry' as never })).toThrow(/"onDuplicate" must be "block" or "raise"/);
  });
});

describe('the proxy (idempotent-tools mcp), the official client over stdio', () => {
  async function proxy(flags: string[] = []) {
    const dir = tempDir();
    const log = join(dir, 'count.log');
    const p = await stdioClient([process.execPath, CLI, 'mcp', '--db', join(dir, 'proxy.db'), ...flags, '--', process.execPath, COUNTING], { COUNT_LOG: log });
    return { ...p, log, dir };
  }

  it('adds tools.idempotency to the capabilities the server declares', async () => {
    const { seen } = await proxy();
    expect(declared(seen).tools).toMatchObject({ idempotency: {} });
  });

  it("the same key with other arguments is refused in SEP-3182's shape; 1 and 1.0 are one call; 9007199254740993 and 9007199254740992 are two", async () => {
    const { client, log } = await proxy();
    // `amount` is not in the tool's schema: the proxy keys it, the server leaves it out.
    await call(client, { name: 'act', arguments: { id: 'a', amount: 1 }, idempotencyKey: 'k-1' });
    const same = await call(client, { name: 'act', arguments: { amount: raw('1.0'), id: raw('"\\u0061"') }, idempotencyKey: 'k-1' });
    expect(same._meta?.['idempotent-tools/replayed']).toBe(true);
    await expect(call(client, { name: 'act', arguments: { id: 'a', amount: 2 }, idempotencyKey: 'k-1' })).rejects.toMatchObject(conflict('k-1'));
    expect(count(log, 'start', 'a')).toBe(1);
    await call(client, { name: 'act', arguments: { id: 'b', amount: raw('9007199254740993') }, idempotencyKey: 'k-2' });
    await expect(call(client, { name: 'act', arguments: { id: 'b', amount: raw('9007199254740992') }, idempotencyKey: 'k-2' })).rejects.toMatchObject(conflict('k-2'));
    await call(client, { name: 'act', arguments: { id: 'b', amount: raw('9007199254740993.0') }, idempotencyKey: 'k-2' });
    expect(count(log, 'start', 'b')).toBe(1);
    // Without a key: two calls, each run.
    await call(client, { name: 'act', arguments: { id: 'c', amount: raw('9007199254740993') } });
    await call(client, { name: 'act', arguments: { id: 'c', amount: raw('9007199254740992') } });
    expect(count(log, 'start', 'c')).toBe(2);
  });

  it('a duplicate in flight under "onDuplicate": "raise" is idempotency_key_in_progress', async () => {
    const dir = tempDir();
    const config = join(dir, 'config.json');
    require('node:fs').writeFileSync(config, JSON.stringify({ onDuplicate: 'raise' }));
    const { client, log } = await proxy(['--config', config]);
    const first = call(client, { name: 'act', arguments: { id: 'h', hold: true }, idempotencyKey: 'k-3' });
    first.catch(() => {}); // awaited below
    await until(() => count(log, 'start', 'h') === 1, 'the first call to start');
    await expect(call(client, { name: 'act', arguments: { id: 'h', hold: true }, idempotencyKey: 'k-3' })).rejects.toMatchObject({
      code: -32010,
      data: { 'idempotent-tools': 'DUPLICATE_IN_FLIGHT', type: 'idempotency_key_in_progress', idempotencyKey: 'k-3' },
    });
    require('node:fs').writeFileSync(`${log}.release`, '');
    expect(text(await first)).toMatch(/did h/);
  });
});
