// The identity harness's driver for the MCP proxy (`idempotent-tools mcp -- <server>`,
// lib/apps/mcp): the built CLI, a real stdio proxy in front of a real, unguarded server
// (drivers/mcp/payments.mjs), with the official SDK client over stdio. A proxy serves the one
// client that started it, and another session of a caller is another proxy of the same
// configuration (a second window, a restarted client), on the same store. Scenario i (of a
// campaign) runs with --tool-call-id when i is odd, and gives the callers' servers:
//
//   i mod 4 < 2   each account's own credentials in the server's environment (as a client
//                 config's `env` block gives them): two accounts, two servers
//   i mod 4 >= 2  one configuration for both (a shared service token), each account's proxy
//                 told its account in IDEMPOTENT_TOOLS_MCP_SCOPE
//
// A call's key goes, by turns, in _meta.idempotencyKey, the top-level idempotencyKey
// (SEP-3182), or inside the arguments at the config's keyPath (arguments.meta
// ["idempotency-key"], as commerce protocols carry it); a call without one is keyed by its
// arguments within the window. Every call carries the runtime's tool call id in _meta (as
// Claude Code sends it): with --tool-call-id it is part of a keyless call's identity, and a
// keyless call whose id is numbered (call_0: a provider that restarts its ids) tells no call
// from a later one, and is refused. One variant: each proxy is two processes to start.
//
// `--control id|args` puts no proxy in front: the server's tool is guarded by controls.js
// (keyed by the tool call id alone, or the arguments alone).

import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { deliverRequests, paramsOf } from './mcp/deliver.mjs';
import { ROOT } from './mcp/payments.mjs';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { CallToolResultSchema } = require('@modelcontextprotocol/sdk/types.js');

const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || ROOT;
const CLI = join(PACKAGE, 'dist', 'cli.js');
const PAYMENTS = join(ROOT, 'stress', 'identity', 'drivers', 'mcp', 'payments.mjs');
const TIMEOUT_MS = 30_000;

const request = { kind: 'request', callers: 2, sessions: true, clientKeys: true, malformed: true, parallel: true };
export const name = 'mcp-proxy';
export const variants = [{ name: 'proxy', capabilities: request }];

/** Where a call's key goes: by turns, _meta, the top level, the arguments. */
const PLACES = ['meta', 'top', 'arguments'];

let runs = 0;

export async function run(scenario, { ledger, control, dir }) {
  const i = runs++;
  const toolCallIds = i % 2 === 1;
  const sharedConfig = i % 4 >= 2;
  if (control === undefined && toolCallIds) {
    // A keyless call with a numbered id (the conversation's ids restart): refused (docs/mcp.md).
    const numbered = new Set(scenario.conversations.filter((c) => c.style !== 'unique').map((c) => c.id));
    for (const e of scenario.events) {
      if (e.op !== 'ask' || !numbered.has(e.conv)) continue;
      for (const call of e.steps.flat()) if (call.clientKey === undefined) scenario.meant[call.meant].expect = 'refused';
    }
  }
  const db = join(dir, 'store.db');
  const config = join(dir, 'proxy.json');
  writeFileSync(config, JSON.stringify({ tools: { pay: { keyPath: ['meta', 'idempotency-key'] } } }));
  const flags = ['--db', db, '--config', config, ...(toolCallIds ? ['--tool-call-id'] : [])];
  const open = async (caller) => {
    const server = [PAYMENTS, db, control === undefined ? 'plain' : 'server', ...(control === undefined ? [] : [control])];
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: control === undefined ? [CLI, 'mcp', ...flags, '--', process.execPath, ...server] : server,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        IDENTITY_LEDGER_DIR: ledger.dir,
        // The account's own credentials configure its server (two accounts: two servers), or
        // one configuration serves both and the proxy is told whose calls it carries.
        ...(sharedConfig ? { PAYMENTS_API_TOKEN: 'secret-shared', IDEMPOTENT_TOOLS_MCP_SCOPE: `acct-${caller}` } : { PAYMENTS_API_TOKEN: `secret-${caller}` }),
        ...(process.env.IDENTITY_PACKAGE_ROOT ? { IDENTITY_PACKAGE_ROOT: process.env.IDENTITY_PACKAGE_ROOT } : {}),
      },
      cwd: ROOT,
      stderr: 'pipe',
    });
    transport.stderr?.on('data', () => {}); // drained
    const client = new Client({ name: `harness-${caller}`, version: '1.0.0' });
    await client.connect(transport);
    return {
      send: (params) => client.request({ method: 'tools/call', params }, CallToolResultSchema, { timeout: TIMEOUT_MS }),
      close: () => client.close(),
    };
  };
  const placeOf = (call) => PLACES[Number(call.meant.slice(1)) % PLACES.length];
  const params = (call) => {
    const p = paramsOf(call, { keyAt: (c) => (placeOf(c) === 'top' ? 'top' : 'meta') });
    if (placeOf(call) === 'arguments' && p._meta.idempotencyKey !== undefined) {
      // The tool's schema drops `meta` from what its handler is handed.
      p.arguments = { ...p.arguments, meta: { 'idempotency-key': p._meta.idempotencyKey } };
      delete p._meta.idempotencyKey;
    }
    return p;
  };
  return deliverRequests(scenario, { ledger, open, params });
}
