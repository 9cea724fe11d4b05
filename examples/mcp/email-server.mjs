#!/usr/bin/env node
// A stand-in for a real MCP server with a side effect: `send_email` "sends" by appending a
// line to the file named by OUTBOX (so the example can count what was sent), and
// `list_outbox` only reads (readOnlyHint: the proxy passes it through).
import { appendFileSync, existsSync, readFileSync } from 'node:fs';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const outbox = process.env.OUTBOX;
if (!outbox) throw new Error('set OUTBOX to a file path');
const sent = () => (existsSync(outbox) ? readFileSync(outbox, 'utf8').split('\n').filter(Boolean) : []);

const server = new McpServer({ name: 'email', version: '1.0.0' });

server.registerTool(
  'send_email',
  { description: 'Sends an email', inputSchema: { to: z.string(), subject: z.string() } },
  async ({ to, subject }) => {
    appendFileSync(outbox, JSON.stringify({ to, subject, at: new Date().toISOString() }) + '\n');
    const id = `msg-${sent().length}`;
    return { content: [{ type: 'text', text: `sent ${id} to ${to}` }], structuredContent: { id } };
  },
);

server.registerTool(
  'list_outbox',
  { description: 'Lists sent emails', inputSchema: {}, annotations: { readOnlyHint: true } },
  async () => ({ content: [{ type: 'text', text: `${sent().length} sent` }] }),
);

await server.connect(new StdioServerTransport());
