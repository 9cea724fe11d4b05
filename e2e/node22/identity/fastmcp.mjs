// The identity harness's driver for idempotent-tools/mcp-server's idempotentTool around a
// fastmcp tool's `execute` (fastmcp needs Node 22, and is installed in e2e/node22; see
// .ci/identity.sh):
//
//   eval "$(.ci/nodes.sh)"
//   PATH="$NODE22_BIN:$PATH" node stress/identity/campaign.mjs --driver e2e/node22/identity/fastmcp.mjs --seed 7
//
// fastmcp's httpStream transport, with the official SDK client:
//
//   stateless          stateless, with `authenticate` naming the account (`sub`) of a bearer
//                      token; a refresh replaces a caller's token (the old one is revoked)
//   stateful           the same with fastmcp's sessions (authenticated when a session starts)
//   stateless-no-auth  stateless, no authenticate: nothing names the caller (a client sends
//                      the mcp-session-id header it likes, here one per session of its
//                      caller): every call is refused, naming "scope"
//
// fastmcp hands `execute` no `_meta`, so no client key and no tool call id reach the tool:
// a call is its arguments within the window (the scenarios give each new call of a caller its own). The
// controls key by the request id fastmcp hands over (none) or by the arguments alone.

import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { FastMCP } from 'fastmcp';
import { z } from 'zod';

import { Tokens, deliverRequests, paramsOf } from '../../../stress/identity/drivers/mcp/deliver.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..', '..', '..');
const require = createRequire(import.meta.url);
const { controlled } = require(join(ROOT, 'stress', 'identity', 'controls.js'));
// The package as built in the repository (or in IDENTITY_PACKAGE_ROOT: another build).
const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || ROOT;
const pkg = require(PACKAGE);
const { idempotentTool } = require(join(PACKAGE, 'dist', 'integrations', 'mcp-server.js'));
const TIMEOUT_MS = 30_000;

const request = { kind: 'request', callers: 2, sessions: true, parallel: true };
export const name = 'fastmcp';
export const variants = [
  { name: 'stateless', capabilities: { ...request, refresh: true }, auth: true, stateless: true },
  { name: 'stateful', capabilities: { ...request, refresh: true }, auth: true, stateless: false },
  { name: 'stateless-no-auth', capabilities: request, auth: false, stateless: true, refusesAll: true },
];

const ignore = () => {};
/** fastmcp logs every stateless request: the verdict says it all here. */
const QUIET = { debug: ignore, error: ignore, info: ignore, log: ignore, warn: ignore };

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

// fastmcp's HTTP layer (mcp-proxy) prints a line for every SSE stream a session opens.
for (const level of ['log', 'error']) {
  const print = console[level].bind(console);
  console[level] = (first, ...rest) => void (typeof first === 'string' && first.startsWith('[mcp-proxy]') ? undefined : print(first, ...rest));
}

export async function run(scenario, { ledger, control, variant, dir }) {
  if (control === undefined && variant.refusesAll) {
    for (const m of Object.values(scenario.meant)) m.expect = 'refused';
  }
  const store = new pkg.SqliteStore({ path: join(dir, 'store.db'), durability: 'normal' });
  const tokens = new Tokens();
  const authenticate = variant.auth
    ? async (req) => {
        const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        const sub = token === undefined ? undefined : tokens.subjects.get(token);
        if (sub === undefined) throw new Response(null, { status: 401, statusText: 'unknown or revoked token' });
        return { sub, token };
      }
    : undefined;
  // The side effect: a payment, its receipt in what the client gets (fastmcp passes no tool call id).
  const pay = async (args) => `paid ${args.orderId} ${args.cents}: ${ledger.record({ toolCallId: null, args })}`;
  let execute;
  if (control !== undefined) {
    const guarded = controlled(control, pay, { idempotent: pkg.idempotent, store, name: 'pay' });
    execute = async (args, context) => guarded(args, String(context.requestId));
  } else execute = idempotentTool(async (args) => pay(args), { name: 'pay', store });

  const port = await freePort();
  const app = new FastMCP({ name: 'payments', version: '1.0.0', logger: QUIET, ...(authenticate ? { authenticate } : {}) });
  app.addTool({ name: 'pay', description: 'Pays an order (once)', parameters: z.object({ orderId: z.string(), cents: z.number() }), execute });
  await app.start({ transportType: 'httpStream', httpStream: { port, host: '127.0.0.1', stateless: variant.stateless } });
  const url = new URL(`http://127.0.0.1:${port}/mcp`);
  const open = async (caller, session) => {
    const withToken = (u, init = {}) => {
      const headers = new Headers(init.headers);
      if (variant.auth) headers.set('authorization', `Bearer ${tokens.of(caller)}`);
      // Without auth, the client names its own session (any header it likes).
      else headers.set('mcp-session-id', session);
      return fetch(u, { ...init, headers });
    };
    const client = new Client({ name: `harness-${caller}`, version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(url, { fetch: withToken }));
    return {
      send: (params) => client.request({ method: 'tools/call', params }, CallToolResultSchema, { timeout: TIMEOUT_MS }),
      close: () => client.close(),
    };
  };
  try {
    return await deliverRequests(scenario, { ledger, open, refresh: (caller) => tokens.refresh(caller), params: (call) => paramsOf(call) });
  } finally {
    await app.stop();
    await store.close();
  }
}
