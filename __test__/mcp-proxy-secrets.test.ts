// No secret on the proxy's command line (issue 36, finding 7). idempotentMcpServers
// (idempotent-tools/claude-agent-sdk) turned an HTTP server's headers (its bearer token), its
// URL and the redis/postgres option (a URL with its password) into the proxy's arguments,
// which every local user reads in `ps` (/proc/<pid>/cmdline is world-readable; a process's
// environment is its owner's alone). The proxy now takes them from its environment, and
// gives none of its own variables to the server it runs.
//
// Each case starts the configuration idempotentMcpServers returns the way an MCP runtime
// does (the MCP SDK's StdioClientTransport: command, args, and env over the default
// environment), reads the proxy's /proc/<pid>/cmdline, and uses the proxy.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterEach, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, runNode, tempDir } from './helpers';
import { CLI, COUNTING, count, events, text } from './mcp-helpers';
import { PG_URL, uniqueTable } from './postgres-server';
import { RedisServer } from './redis-server';

const require = createRequire(import.meta.url);
const claude: typeof import('../dist/integrations/claude-agent-sdk.js') = require(join(ROOT, 'dist', 'integrations', 'claude-agent-sdk.js'));

const PAYMENTS = join(ROOT, '__test__', 'fixtures', 'mcp-server-payments.mjs');
const closers: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

interface StdioConfig {
  type: 'stdio';
  command: string;
  args: string[];
  env?: Record<string, string>;
}

/** Starts a stdio server config as an MCP runtime does, and connects a client to it. */
async function start(config: StdioConfig, extraEnv: Record<string, string> = {}) {
  expect(config.type).toBe('stdio');
  const transport = new StdioClientTransport({
    command: config.command,
    args: config.args,
    env: { ...getDefaultEnvironment(), ...extraEnv, ...(config.env ?? {}) },
    stderr: 'pipe',
    cwd: ROOT,
  });
  let stderr = '';
  transport.stderr!.on('data', (d) => (stderr += d));
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(transport);
  closers.push(() => client.close());
  const cmdline = readFileSync(`/proc/${transport.pid}/cmdline`, 'utf8').split('\0').join(' ');
  return { client, cmdline, stderr: () => stderr };
}

/** A postgres:// URL with a password (trust auth lets it in whatever the password). */
function withPassword(url: string, password: string): string {
  const u = new URL(url);
  if (u.password === '') u.password = password;
  return u.href;
}

describe('idempotentMcpServers: no secret on the proxy\'s command line', () => {
  it('an HTTP server: its bearer token, a token in its URL and the Postgres password stay off the command line, and the proxy uses them', async () => {
    const dir = tempDir();
    const log = join(dir, 'charges.log');
    const upstream = spawn(process.execPath, [PAYMENTS, 'http', join(dir, 'store.db'), log], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    closers.push(() => void upstream.kill());
    const port = Number((await lineFrom(upstream, /^listening \d+/)).split(' ')[1]);
    const postgres = withPassword(PG_URL, 'pg-secret-456');
    const servers = claude.idempotentMcpServers(
      { pay: { type: 'http', url: `http://127.0.0.1:${port}/mcp?token=url-secret-123`, headers: { authorization: 'Bearer token-alice' } } },
      { postgres },
    );
    const config = servers.pay as unknown as StdioConfig;
    const table = uniqueTable();
    const proxy = await start(config, { IDEMPOTENT_TOOLS_POSTGRES_TABLE: table, IDEMPOTENT_TOOLS_DB: join(dir, 'not-this.db') });
    for (const secret of ['token-alice', 'url-secret-123', 'pg-secret-456']) expect(proxy.cmdline).not.toContain(secret);
    expect(JSON.stringify(config.args)).not.toMatch(/token-alice|url-secret-123|pg-secret-456/);
    // The bearer token reached the server (it answers for alice), the store is Postgres (a repeat replays).
    const first = await proxy.client.callTool({ name: 'send_payment', arguments: { orderId: 'o-1', cents: 100 } });
    expect(text(first)).toBe('charged o-1 100 for alice');
    const again = await proxy.client.callTool({ name: 'send_payment', arguments: { orderId: 'o-1', cents: 100 } });
    expect(again._meta?.['idempotent-tools/replayed']).toBe(true);
    expect(readFileSync(log, 'utf8')).toBe('alice o-1 100\n');
    const records = new lib.PostgresStore({ url: PG_URL, table });
    closers.push(() => records.close());
    expect((await records.listRecords({})).map((r) => r.name)).toEqual(['payments/send_payment']);
  });

  it("a stdio server: the Redis password stays off the proxy's command line and out of the server's environment; the proxy uses it", async () => {
    const redis = await RedisServer.start(['--requirepass', 'redis-secret-789']);
    closers.push(() => redis.kill());
    const log = join(tempDir(), 'count.log');
    const servers = claude.idempotentMcpServers(
      { counting: { command: process.execPath, args: [COUNTING], env: { COUNT_LOG: log } } },
      { redis: `redis://:redis-secret-789@127.0.0.1:${redis.port}` },
    );
    const proxy = await start(servers.counting as unknown as StdioConfig, { IDEMPOTENT_TOOLS_DB: join(tempDir(), 'not-this.db') });
    expect(proxy.cmdline).not.toContain('redis-secret-789');
    const call = { name: 'act', arguments: { id: 'a' } };
    await proxy.client.callTool(call, undefined);
    const again = await proxy.client.callTool(call);
    expect(again._meta?.['idempotent-tools/replayed']).toBe(true);
    expect(count(log, 'start', 'a')).toBe(1);
    const records = new lib.RedisStore({ url: `redis://:redis-secret-789@127.0.0.1:${redis.port}` });
    closers.push(() => records.close());
    expect((await records.listRecords({})).map((r) => r.name)).toEqual(['counting/act']);
    // The server the proxy runs gets the environment it was configured with, not the proxy's store.
    const server = events(log).find((e) => e.event === 'up')!.pid;
    const environ = readFileSync(`/proc/${server}/environ`, 'utf8');
    expect(environ).toContain(`COUNT_LOG=${log}`);
    expect(environ).not.toContain('redis-secret-789');
    expect(environ).not.toContain('IDEMPOTENT_TOOLS_MCP_');
  });
});

describe('idempotent-tools mcp: headers, the URL and store URLs from the environment', () => {
  it('IDEMPOTENT_TOOLS_MCP_URL and IDEMPOTENT_TOOLS_MCP_HEADERS stand for --url and --header', async () => {
    const dir = tempDir();
    const log = join(dir, 'charges.log');
    const upstream = spawn(process.execPath, [PAYMENTS, 'http', join(dir, 'store.db'), log], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    closers.push(() => void upstream.kill());
    const port = Number((await lineFrom(upstream, /^listening \d+/)).split(' ')[1]);
    const proxy = await start(
      { type: 'stdio', command: process.execPath, args: [CLI, 'mcp', '--db', join(dir, 'proxy.db')] },
      { IDEMPOTENT_TOOLS_MCP_URL: `http://127.0.0.1:${port}/mcp`, IDEMPOTENT_TOOLS_MCP_HEADERS: JSON.stringify({ Authorization: 'Bearer token-bob' }) },
    );
    expect(text(await proxy.client.callTool({ name: 'send_payment', arguments: { orderId: 'o-2', cents: 5 } }))).toBe('charged o-2 5 for bob');
  });

  it('a bad IDEMPOTENT_TOOLS_MCP_HEADERS, or one without an HTTP server, stops the proxy with a message that names it', async () => {
    const bad = await runNode([CLI, 'mcp', '--url', 'http://127.0.0.1:9/mcp'], { env: { IDEMPOTENT_TOOLS_MCP_HEADERS: 'Authorization: Bearer x' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/IDEMPOTENT_TOOLS_MCP_HEADERS must be a JSON object of header names to values/);
    const notString = await runNode([CLI, 'mcp', '--url', 'http://127.0.0.1:9/mcp'], { env: { IDEMPOTENT_TOOLS_MCP_HEADERS: '{"Authorization": 7}' } });
    expect(notString.code).toBe(2);
    expect(notString.stderr).toMatch(/IDEMPOTENT_TOOLS_MCP_HEADERS: "Authorization" must be a string/);
    const withCommand = await runNode([CLI, 'mcp', '--', process.execPath, COUNTING], { env: { IDEMPOTENT_TOOLS_MCP_HEADERS: '{"Authorization": "Bearer x"}' } });
    expect(withCommand.code).toBe(2);
    expect(withCommand.stderr).toMatch(/IDEMPOTENT_TOOLS_MCP_HEADERS goes with an HTTP server/);
  });
});
