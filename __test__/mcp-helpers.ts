/** Shared by the MCP proxy tests: a real SDK client talking to `idempotent-tools mcp`
 * (the built CLI) over stdio, which spawns a real MCP server. */

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';

import { ROOT } from './helpers';

export const CLI = join(ROOT, 'dist', 'cli.js');
export const COUNTING = join(ROOT, '__test__', 'fixtures', 'mcp-counting-server.mjs');
export const EVERYTHING = join(ROOT, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');

export interface Proxied {
  client: Client;
  transport: StdioClientTransport;
  /** The proxy's stderr so far (its --log lines, and the server's stderr). */
  stderr(): string;
  /** The proxy's process id. */
  pid: number;
  close(): Promise<void>;
}

export interface ConnectOptions {
  /** The proxy's flags before `--` (store, window, config, --log is always on). */
  flags: string[];
  /** The upstream server's command (default: the counting server). */
  server?: string[];
  env?: Record<string, string>;
  /** The proxy's working directory (default: the repository's root). */
  cwd?: string;
  capabilities?: ClientCapabilities;
  /** The client's read limit on one message (the SDK's default is 10 MB). */
  maxBufferSize?: number;
}

/** Starts `idempotent-tools mcp <flags> -- <server>` and connects an SDK client to it. */
export async function connect(options: ConnectOptions): Promise<Proxied> {
  const server = options.server ?? [process.execPath, COUNTING];
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, 'mcp', '--log', ...options.flags, ...(server.length > 0 ? ['--', ...server] : [])],
    env: { ...(process.env as Record<string, string>), ...options.env },
    stderr: 'pipe',
    cwd: options.cwd ?? ROOT,
    ...(options.maxBufferSize === undefined ? {} : { maxBufferSize: options.maxBufferSize }),
  } as ConstructorParameters<typeof StdioClientTransport>[0]);
  let stderr = '';
  transport.stderr!.on('data', (d) => (stderr += d));
  const client = new Client({ name: 'idempotent-tools-test', version: '1.0.0' }, { capabilities: options.capabilities ?? {} });
  await client.connect(transport);
  return {
    client,
    transport,
    stderr: () => stderr,
    pid: transport.pid!,
    close: () => client.close(),
  };
}

/** Waits until `condition()` holds: synchronisation on something the test can observe. */
export async function until(condition: () => boolean, what: string, timeoutMs = 45_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits until the proxy's log (its stderr) shows `line`. The log is a pipe of its own, so
 * a line written before a response may still be on its way when the response arrives. */
export function logShows(p: { stderr(): string }, line: RegExp): Promise<void> {
  return until(() => line.test(p.stderr()), `the proxy's log to show ${line}`, 10_000);
}

export interface CountEvent {
  event: 'up' | 'start' | 'done' | 'look' | 'cancelled';
  id?: string;
  pid: number;
}

/** The counting servers' shared log of what they did. */
export function events(log: string): CountEvent[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as CountEvent);
}

export function count(log: string, event: CountEvent['event'], id: string): number {
  return events(log).filter((e) => e.event === event && e.id === id).length;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The text of a CallToolResult's first content block. */
export function text(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content[0]?.text ?? '';
}
