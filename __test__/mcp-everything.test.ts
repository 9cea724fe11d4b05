/**
 * `idempotent-tools mcp` in front of `@modelcontextprotocol/server-everything` (every
 * kind of MCP message), with a client nobody here wrote: the SDK's Client (the MCP
 * Inspector's CLI mode is the other, in e2e/node22/mcp-inspector.mjs: it needs Node 22). Also: `npx idempotent-tools mcp -- npx @modelcontextprotocol/server-everything`
 * in a project that installed the package, offline.
 */

import { execFile, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';

import { ROOT, tempDir } from './helpers';
import { CLI, EVERYTHING, connect, text, until, logShows, type Proxied } from './mcp-helpers';

const run = promisify(execFile);
const REPLAYED = 'idempotent-tools/replayed';

let open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.allSettled(open.map((p) => p.close()));
  open = [];
});

async function direct(capabilities: object) {
  const client = new Client({ name: 'direct', version: '1.0.0' }, { capabilities });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [EVERYTHING], stderr: 'pipe' }));
  open.push(client);
  return client;
}

describe('idempotent-tools mcp forwards every kind of message (server-everything)', () => {
  it('initialize, lists, resources, prompts, completion, logging, subscriptions, progress, sampling, elicitation, roots, ping', async () => {
    const capabilities = { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } };
    const p: Proxied = await connect({
      flags: ['--db', join(tempDir(), 'store.db')],
      server: [process.execPath, EVERYTHING],
      capabilities,
    });
    open.push(p);
    const c = p.client;
    const d = await direct(capabilities);

    // What the client negotiated is the real server's, exactly.
    expect(c.getServerCapabilities()).toEqual(d.getServerCapabilities());
    expect(c.getServerVersion()).toEqual(d.getServerVersion());
    expect(c.getInstructions()).toEqual(d.getInstructions());
    expect(await c.listTools()).toEqual(await d.listTools());
    expect(await c.listResources()).toEqual(await d.listResources());
    expect(await c.listResourceTemplates()).toEqual(await d.listResourceTemplates());
    expect(await c.listPrompts()).toEqual(await d.listPrompts());
    const [resource] = (await c.listResources()).resources;
    expect(await c.readResource({ uri: resource.uri })).toEqual(await d.readResource({ uri: resource.uri }));
    expect(await c.getPrompt({ name: 'args-prompt', arguments: { city: 'Lyon', state: 'Rhône' } })).toEqual(
      await d.getPrompt({ name: 'args-prompt', arguments: { city: 'Lyon', state: 'Rhône' } }),
    );
    const completion = await c.complete({
      ref: { type: 'ref/prompt', name: 'completable-prompt' },
      argument: { name: 'department', value: 'E' },
    });
    expect(completion.completion.values.length).toBeGreaterThan(0);
    expect(await c.ping()).toEqual({});
    expect(await c.callTool({ name: 'echo', arguments: { message: 'hi' } })).toEqual(
      await d.callTool({ name: 'echo', arguments: { message: 'hi' } }),
    );

    // Server-to-client notifications: logging, and resource updates after a subscribe.
    const logged: unknown[] = [];
    c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logged.push(n.params));
    await c.setLoggingLevel('debug');
    await c.callTool({ name: 'toggle-simulated-logging', arguments: {} });
    await until(() => logged.length > 0, 'a logging notification');
    const updated: string[] = [];
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
    await c.subscribeResource({ uri: resource.uri });
    await c.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    await until(() => updated.includes(resource.uri), 'a resource update notification');

    // Progress of a long-running call reaches the client under its own token.
    const progress: number[] = [];
    await c.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, {
      onprogress: (n) => progress.push(n.progress),
    });
    expect(progress.length).toBeGreaterThanOrEqual(2);

    // Requests from the server to the client: sampling, elicitation, roots.
    c.setRequestHandler(CreateMessageRequestSchema, async () => ({
      model: 'test-model',
      role: 'assistant',
      content: { type: 'text', text: 'sampled through the proxy' },
    }));
    c.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'decline' }));
    c.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///tmp/proxied-root', name: 'root' }] }));
    const sampled = await c.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hello' } });
    expect(text(sampled)).toContain('sampled through the proxy');
    const elicited = await c.callTool({ name: 'trigger-elicitation-request', arguments: {} });
    expect(JSON.stringify(elicited)).toMatch(/decline/i);
    await c.sendRootsListChanged();
    const roots = await c.callTool({ name: 'get-roots-list', arguments: {} });
    expect(JSON.stringify(roots)).toContain('file:///tmp/proxied-root');

    // The guard: a side-effecting tool (not read-only, not idempotent) replays.
    await c.callTool({ name: 'toggle-simulated-logging', arguments: {} }); // was on: a retry of that call
    await logShows(p, /replayed\s+\S+\/toggle-simulated-logging/);
    await logShows(p, /passed\s+\S+\/echo\s+\(readOnlyHint\)/);
  });
});

describe('--url: an upstream over Streamable HTTP', () => {
  it('forwards to server-everything over HTTP, and guards its side-effecting tools', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const server = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    open.push({ close: async () => void server.kill() });
    let serverErr = '';
    server.stderr!.on('data', (d) => (serverErr += d));
    await until(() => /listening on port/.test(serverErr), 'the HTTP server to listen');

    const db = join(tempDir(), 'store.db');
    const url = `http://127.0.0.1:${port}/mcp`;
    const p = await connect({ flags: ['--db', db, '--url', url], server: [] });
    open.push(p);
    expect(p.client.getServerVersion()?.name).toMatch(/everything/);
    expect((await p.client.listTools()).tools.length).toBeGreaterThan(5);
    const progress: number[] = [];
    await p.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 2 } }, undefined, {
      onprogress: (n) => progress.push(n.progress),
    });
    expect(progress.length).toBeGreaterThanOrEqual(1);
    await p.client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    const again = await p.client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    expect(again._meta?.[REPLAYED]).toBe(true);
    // Other headers (another account's token) are another upstream: no shared record.
    const withToken = (token: string) =>
      connect({ flags: ['--db', db, '--url', url, '--header', `Authorization: Bearer ${token}`], server: [] });
    const b = await withToken('token-of-b');
    open.push(b);
    expect((await b.client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }))._meta?.[REPLAYED]).toBeUndefined();
    const b2 = await withToken('token-of-b');
    open.push(b2);
    expect((await b2.client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }))._meta?.[REPLAYED]).toBe(true);
  });
});

describe('npx idempotent-tools mcp -- npx @modelcontextprotocol/server-everything', () => {
  it('works in a project that installed the package, offline, with a real client', async () => {
    const project = tempDir();
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({
        name: 'uses-idempotent-tools',
        private: true,
        dependencies: {
          'idempotent-tools': `file:${ROOT}`,
          '@modelcontextprotocol/server-everything': `file:${join(ROOT, 'node_modules', '@modelcontextprotocol', 'server-everything')}`,
        },
      }),
    );
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: project, timeout: 120_000 });
    const client = new Client({ name: 'npx-check', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: 'npx',
        args: ['--offline', 'idempotent-tools', 'mcp', '--db', join(project, 'store.db'), '--', 'npx', '--offline', '@modelcontextprotocol/server-everything'],
        cwd: project,
        stderr: 'pipe',
      }),
    );
    open.push(client);
    expect(client.getServerVersion()?.name).toMatch(/everything/);
    const result = await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });
    expect(text(result)).toMatch(/5/);
  }, 180_000);
});
