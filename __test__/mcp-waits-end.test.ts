// A wait for another call ends when its own request is cancelled or its client leaves
// (issue 36, finding 6), on both MCP surfaces: idempotent-tools/mcp-server (the MCP SDK's
// in-process transport and stdio) and the proxy (idempotent-tools mcp). A client sent 300
// copies of a slow call, cancelled them and left; each copy waited for the first by polling
// the store, every 200 ms for ten minutes, for answers nobody would read.
//
// What is counted is the store's requests (a wrapping store in process, the Redis server's
// own command count for the proxy), never how long something took. A waiter still there
// when the first call settles asks the store again (the settle wakes it), so "no request
// after the waiters ended, through the first call's settle" is what says they are gone.

import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb, tempDir } from './helpers';
import { alive, connect, count, text, until } from './mcp-helpers';
import { RedisServer, redisCommand } from './redis-server';
import { countingRequests } from './store-requests';

const require = createRequire(import.meta.url);
const mcpServer: typeof import('../dist/integrations/mcp-server.js') = require(`${ROOT}/dist/integrations/mcp-server.js`);

const WAITERS = 300;
const closers: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

function gate() {
  let open!: () => void;
  let started!: () => void;
  return { opened: new Promise<void>((r) => (open = r)), started: new Promise<void>((r) => (started = r)), open: () => open(), start: () => started() };
}

type Guarding = 'idempotentServer' | 'idempotentTool';

/** An McpServer with one slow write tool, guarded either way, on the SDK's in-process transport. */
async function inProcess(guarding: Guarding) {
  const raw = new lib.SqliteStore({ path: tempDb() });
  closers.push(() => raw.close());
  const { store, count: requests } = countingRequests(raw);
  const g = gate();
  let charges = 0;
  let waiting = 0;
  let executed = 0;
  /** How each guarded call that threw ended, as the server saw it. */
  const ended: unknown[] = [];
  const onEvent = (e: { type: string }) => {
    if (e.type === 'in-flight') waiting += 1;
    if (e.type === 'executed') executed += 1;
  };
  const options = { store, scope: 'account-1', onEvent };
  const server = new McpServer({ name: 'payments', version: '1.0.0' });
  const slow = async ({ orderId }: { orderId: string }) => {
    charges += 1;
    g.start();
    await g.opened;
    return { content: [{ type: 'text' as const, text: `charged ${orderId}` }] };
  };
  if (guarding === 'idempotentTool') {
    const guarded = mcpServer.idempotentTool(slow, { ...options, name: 'slow_payment', server: 'payments' });
    server.registerTool('slow_payment', { inputSchema: { orderId: z.string() } }, async (args, extra) => {
      try {
        return await guarded(args, extra);
      } catch (err) {
        ended.push(err);
        throw err;
      }
    });
  } else {
    server.registerTool('slow_payment', { inputSchema: { orderId: z.string() } }, slow);
    mcpServer.idempotentServer(server, options);
    // What the guard answers each request with, seen where the SDK gets it.
    const handlers = (server.server as unknown as { _requestHandlers: Map<string, (r: unknown, x: unknown) => Promise<unknown>> })._requestHandlers;
    const guarded = handlers.get('tools/call')!;
    handlers.set('tools/call', async (request, extra) => {
      try {
        return await guarded(request, extra);
      } catch (err) {
        ended.push(err);
        throw err;
      }
    });
  }
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(clientSide);
  closers.push(() => client.close());
  const call = (signal?: AbortSignal) =>
    client.request({ method: 'tools/call', params: { name: 'slow_payment', arguments: { orderId: 'o-1' } } }, CallToolResultSchema, { ...(signal ? { signal } : {}), timeout: 600_000 });
  const claims = () => requests('acquire', (r: { name?: string }) => r?.name === 'payments/slow_payment');
  return { client, g, call, claims, ended, charges: () => charges, waiting: () => waiting, executed: () => executed };
}

/** The guard's refusal that says a wait ended, as each surface hands it to its framework. */
function stoppedWaiting(err: unknown, guarding: Guarding) {
  if (guarding === 'idempotentTool') return expect(err).toMatchObject({ name: 'AbortError', code: 'WAIT_ABANDONED' });
  return expect(err).toMatchObject({ code: -32010, data: { 'idempotent-tools': 'WAIT_ABANDONED' } });
}

for (const guarding of ['idempotentServer', 'idempotentTool'] as const) {
  describe(`mcp-server (${guarding}) on the MCP SDK's in-process transport`, () => {
    it(`${WAITERS} duplicates of a slow call, cancelled (notifications/cancelled), then the client gone: each stops waiting at its cancel, the store is asked nothing more, the first call completes once`, async () => {
      const s = await inProcess(guarding);
      const first = s.call().catch((err: unknown) => err);
      await s.g.started;
      const controllers = Array.from({ length: WAITERS }, () => new AbortController());
      const duplicates = controllers.map((c) => s.call(c.signal).catch((err: unknown) => err));
      await until(() => s.waiting() === WAITERS, `${WAITERS} duplicates to wait for the first call`);
      for (const c of controllers) c.abort('the user gave up');
      // The client's side of each ends at once (the SDK's own); the server's side too:
      await until(() => s.ended.length === WAITERS, `the server to end the ${WAITERS} waits`);
      for (const err of s.ended) stoppedWaiting(err, guarding);
      for (const err of await Promise.all(duplicates)) expect(String(err)).toMatch(/gave up/);
      const asked = s.claims();
      // Then the client leaves; the first call is not stopped (cancel: 'finish'): it completes, recorded.
      await s.client.close();
      s.g.open();
      await until(() => s.executed() === 1, 'the first call to complete');
      expect(s.claims()).toBe(asked);
      expect(s.charges()).toBe(1);
      await first;
    });

    it(`${WAITERS} duplicates of a slow call, and the client leaves (its transport closes): each stops waiting; the first call completes once`, async () => {
      const s = await inProcess(guarding);
      void s.call().catch(() => {});
      await s.g.started;
      const duplicates = Array.from({ length: WAITERS }, () => s.call().catch((err: unknown) => err));
      await until(() => s.waiting() === WAITERS, `${WAITERS} duplicates to wait for the first call`);
      await s.client.close();
      await until(() => s.ended.length === WAITERS, `the server to end the ${WAITERS} waits`);
      for (const err of s.ended) stoppedWaiting(err, guarding);
      for (const err of await Promise.all(duplicates)) expect(String(err)).toMatch(/Connection closed/);
      const asked = s.claims();
      s.g.open();
      await until(() => s.executed() === 1, 'the first call to complete');
      expect(s.claims()).toBe(asked);
      expect(s.charges()).toBe(1);
    });
  });
}

describe('mcp-server (idempotentServer) on stdio', () => {
  it(`the client closes its end: ${WAITERS} duplicates stop waiting (each answered so), the first call completes once, and the server ends by itself`, async () => {
    const dir = tempDir();
    const log = join(dir, 'charges.log');
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [join(ROOT, '__test__', 'fixtures', 'mcp-server-slow.mjs'), join(dir, 'store.db'), log],
      stderr: 'pipe',
      cwd: ROOT,
    });
    let stderr = '';
    transport.stderr!.on('data', (d) => (stderr += d));
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(transport);
    const child = (transport as unknown as { _process: import('node:child_process').ChildProcess })._process;
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    closers.push(() => void child.kill('SIGKILL'));
    const call = () => client.request({ method: 'tools/call', params: { name: 'slow_payment', arguments: { orderId: 'o-1' } } }, CallToolResultSchema, { timeout: 600_000 });
    const first = call();
    first.catch(() => {}); // awaited below; a test that fails before must not leave it unhandled
    await until(() => stderr.includes('started o-1'), 'the first call to start');
    const duplicates = Array.from({ length: WAITERS }, () => call().catch((err: unknown) => err));
    await until(() => stderr.split('\n').filter((l) => l === 'in-flight').length === WAITERS, `${WAITERS} duplicates to wait`);
    // The client closes the server's stdin (MCP's stdio shutdown), and still reads its answers.
    child.stdin!.end();
    for (const err of await Promise.all(duplicates)) expect(err).toMatchObject({ code: -32010, data: { 'idempotent-tools': 'WAIT_ABANDONED' } });
    writeFileSync(`${log}.release`, '');
    expect(text(await first)).toBe('charged o-1');
    // Nothing is left polling: the server ends on its own once its first call is done.
    expect(await exited).toBe(0);
    expect(stderr.split('\n').filter((l) => l === 'executed')).toHaveLength(1);
    // One signal for every call (stdin's end), one listener on it however many wait. (The SDK's
    // own transport may warn of its 'drain' listeners, writing 300 answers at once.)
    expect(stderr).not.toMatch(/abort listeners added to \[AbortSignal\]/);
    expect(require('node:fs').readFileSync(log, 'utf8')).toBe('o-1\n');
  });
});

describe('the proxy (idempotent-tools mcp), on a Redis server of its own whose commands are counted', () => {
  const commands = async (redis: RedisServer) => Number(/total_commands_processed:(\d+)/.exec(await redisCommand(redis.port, 'INFO stats'))![1]);
  const lines = (stderr: string, pattern: RegExp) => stderr.split('\n').filter((l) => pattern.test(l)).length;

  async function proxied(redis: RedisServer, log: string) {
    const p = await connect({ flags: ['--redis', redis.url, '--prefix', 'waits:'], env: { COUNT_LOG: log } });
    closers.push(() => p.close());
    const child = (p.transport as unknown as { _process: import('node:child_process').ChildProcess })._process;
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const call = (signal?: AbortSignal) =>
      p.client.request({ method: 'tools/call', params: { name: 'act', arguments: { id: 'a', hold: true } } }, CallToolResultSchema, { ...(signal ? { signal } : {}), timeout: 600_000 });
    return { p, child, exited, call };
  }

  it(`${WAITERS} duplicates cancelled, then the client gone: each stops waiting, Redis hears nothing more from them, the first call completes once and is recorded`, async () => {
    const redis = await RedisServer.start();
    closers.push(() => redis.kill());
    const log = join(tempDir(), 'count.log');
    const { p, child, exited, call } = await proxied(redis, log);
    const first = call();
    first.catch(() => {}); // awaited below; a test that fails before must not leave it unhandled
    await until(() => count(log, 'start', 'a') === 1, 'the first call to start');
    const controllers = Array.from({ length: WAITERS }, () => new AbortController());
    const duplicates = controllers.map((c) => call(c.signal).catch((err: unknown) => err));
    await until(() => lines(p.stderr(), /waiting +counting\/act/) === WAITERS, `${WAITERS} duplicates to wait`);
    for (const c of controllers) c.abort('the user gave up');
    await until(() => lines(p.stderr(), /stopped +counting\/act/) === WAITERS, `the proxy to end the ${WAITERS} waits`);
    for (const err of await Promise.all(duplicates)) expect(String(err)).toMatch(/gave up/);
    const before = await commands(redis);
    // The client leaves (closes the proxy's stdin): the first call still finishes, recorded.
    child.stdin!.end();
    writeFileSync(`${log}.release`, '');
    expect(text(await first)).toMatch(/did a \(execution 1\)/);
    expect(await exited).toBe(0);
    // Its claim's settle, renewals, the proxy's close: a handful; one more poll of each waiter would be 300.
    expect((await commands(redis)) - before).toBeLessThan(50);
    expect(count(log, 'start', 'a')).toBe(1);
    // Recorded: a retry through a new proxy on the same store gets it.
    const again = await proxied(redis, log);
    expect(text(await again.call())).toMatch(/did a \(execution 1\)/);
    expect(count(log, 'start', 'a')).toBe(1);
  });

  it(`${WAITERS} duplicates, and the client closes its end without cancelling: each stops waiting at once; the first call completes once`, async () => {
    const redis = await RedisServer.start();
    closers.push(() => redis.kill());
    const log = join(tempDir(), 'count.log');
    const { p, child, exited, call } = await proxied(redis, log);
    const first = call();
    first.catch(() => {}); // awaited below; a test that fails before must not leave it unhandled
    await until(() => count(log, 'start', 'a') === 1, 'the first call to start');
    const duplicates = Array.from({ length: WAITERS }, () => call().catch((err: unknown) => err));
    await until(() => lines(p.stderr(), /waiting +counting\/act/) === WAITERS, `${WAITERS} duplicates to wait`);
    child.stdin!.end();
    await until(() => lines(p.stderr(), /stopped +counting\/act/) === WAITERS, `the proxy to end the ${WAITERS} waits`);
    for (const err of await Promise.all(duplicates)) expect(err).toMatchObject({ code: -32010, data: { 'idempotent-tools': 'WAIT_ABANDONED' } });
    const before = await commands(redis);
    writeFileSync(`${log}.release`, '');
    expect(text(await first)).toMatch(/did a \(execution 1\)/);
    expect(await exited).toBe(0);
    expect((await commands(redis)) - before).toBeLessThan(50);
    expect(count(log, 'start', 'a')).toBe(1);
    expect(alive(p.pid)).toBe(false);
    // One signal for every call ("the client left"), one listener on it however many wait.
    expect(p.stderr()).not.toMatch(/abort listeners added to \[AbortSignal\]/);
  });
});
