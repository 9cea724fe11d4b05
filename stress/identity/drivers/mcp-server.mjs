// The identity harness's driver for idempotent-tools/mcp-server: `idempotentServer` over an
// McpServer (and `idempotentTool` over its one handler), with the official SDK client
// (@modelcontextprotocol/sdk) over every transport a server is reached by:
//
//   stdio              a real child process per session (drivers/mcp/payments.mjs): each
//                      caller's server runs with its own account's credentials in its
//                      environment; another session of a caller is another process of the
//                      same configuration (a restarted server, a second window)
//   http-stateful      Streamable HTTP with sessions (Mcp-Session-Id, one McpServer per
//                      session), behind the SDK's bearer auth, whose verifier puts the
//                      account in authInfo.extra.sub; a refresh replaces a caller's token
//                      (the old one is revoked), the sub stays
//   http-stateless     the same without sessions: one McpServer per request
//   in-memory          the SDK's in-process transport, one McpServer per session as a
//                      multi-user backend makes them, each with the `scope` of its account
//   in-memory-auth     the same, the transport handing the server each message's authInfo
//                      (as one behind bearer auth does), no `scope`
//   tool               idempotentTool over the handler alone, on the in-process transport
//                      with authInfo (its refusals are isError results; the client's key
//                      only in _meta, which is all a handler sees)
//   cannot-tell        servers that cannot tell their callers apart, scenario i on the
//                      (i mod 4)th: every call is refused, naming "scope". The in-process transport
//                      with neither scope nor authInfo; Streamable HTTP with sessions and no
//                      auth (only a session id, which a client chooses); with a verifier that
//                      names no subject (only the token, which a refresh replaces); stateless
//                      with no auth (nothing at all)
//
// Every call carries the runtime's tool call id in _meta (as Claude Code sends it) and, when
// the scenario gives it one, the client's idempotency key in _meta.idempotencyKey or the
// top-level idempotencyKey (SEP-3182). `--control id|args` guards the tool with controls.js
// instead of the helper (keyed by the tool call id alone, or the arguments alone).

import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { Tokens, deliverRequests, paramsOf } from './mcp/deliver.mjs';
import { ROOT, paymentsServer, repositoryParts } from './mcp/payments.mjs';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { createMcpExpressApp } = require('@modelcontextprotocol/sdk/server/express.js');
const { requireBearerAuth } = require('@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js');
const { InvalidTokenError } = require('@modelcontextprotocol/sdk/server/auth/errors.js');
const { CallToolResultSchema, isInitializeRequest } = require('@modelcontextprotocol/sdk/types.js');

const parts = repositoryParts();
const PAYMENTS = join(ROOT, 'stress', 'identity', 'drivers', 'mcp', 'payments.mjs');
/** No call of the harness waits this long (a hang is a failure, not a stall of the campaign). */
const TIMEOUT_MS = 30_000;

const request = { kind: 'request', callers: 2, sessions: true, clientKeys: true, malformed: true, parallel: true };
export const name = 'mcp-server';
export const variants = [
  { name: 'stdio', capabilities: request },
  { name: 'http-stateful', capabilities: { ...request, refresh: true }, http: { auth: 'sub' } },
  { name: 'http-stateless', capabilities: { ...request, refresh: true }, http: { auth: 'sub', stateless: true } },
  { name: 'in-memory', capabilities: request },
  { name: 'in-memory-auth', capabilities: { ...request, refresh: true } },
  { name: 'tool', capabilities: { ...request, refresh: true }, keysIn: 'meta' },
  // Each scenario in turn on one of the servers that cannot tell their callers apart.
  { name: 'cannot-tell', capabilities: { ...request, refresh: true, malformed: false }, refusesAll: true },
];

/** The servers that cannot tell their callers apart, in the order the cannot-tell variant takes them. */
const CANNOT_TELL = [
  { name: 'in-memory-no-scope' },
  { name: 'http-no-auth', http: {} },
  { name: 'http-no-sub', http: { auth: 'token' } },
  { name: 'http-stateless-no-auth', http: { stateless: true } },
];
let cannotTellRuns = 0;

/** Where a call's key goes: _meta for every other call, the top-level idempotencyKey for the rest. */
function keyAt(variant) {
  if (variant.keysIn === 'meta') return () => 'meta';
  return (call) => (Number(call.meant.slice(1)) % 2 === 0 ? 'top' : 'meta');
}

/** A client over a transport: one tools/call per send. */
async function clientOver(transport, caller) {
  const client = new Client({ name: `harness-${caller}`, version: '1.0.0' });
  await client.connect(transport);
  return {
    send: (params) => client.request({ method: 'tools/call', params }, CallToolResultSchema, { timeout: TIMEOUT_MS }),
    close: () => client.close(),
  };
}

/** Streamable HTTP, in this process: stateful (a session per client) or stateless, with or without bearer auth. */
async function httpServer({ stateless, auth, tokens, build }) {
  const app = createMcpExpressApp();
  if (auth !== undefined) {
    const verifier = {
      verifyAccessToken: async (token) => {
        const info = tokens.authInfo(token, auth === 'sub');
        if (info === undefined) throw new InvalidTokenError('unknown or revoked token');
        return info;
      },
    };
    app.use('/mcp', requireBearerAuth({ verifier }));
  }
  const sessions = new Map();
  const closers = new Set();
  app.all('/mcp', async (req, res) => {
    try {
      if (stateless) {
        if (req.method !== 'POST') return void res.status(405).end();
        const server = build();
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
        res.on('close', () => void transport.close());
        await server.connect(transport);
        await transport.handleRequest(req, res, req.body);
        return;
      }
      const sid = req.headers['mcp-session-id'];
      let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
      if (transport === undefined) {
        if (sid !== undefined || req.method !== 'POST' || !isInitializeRequest(req.body)) {
          return void res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'no such session' }, id: null });
        }
        transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => sessions.set(id, transport) });
        const server = build();
        closers.add(() => server.close());
        await server.connect(transport);
      }
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: String(err?.message ?? err) }, id: null });
    }
  });
  const http = app.listen(0, '127.0.0.1');
  await once(http, 'listening');
  return {
    url: new URL(`http://127.0.0.1:${http.address().port}/mcp`),
    close: async () => {
      for (const close of closers) await close().catch(() => {});
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

export async function run(scenario, { ledger, control, variant: chosen, dir }) {
  const variant = chosen.refusesAll ? { ...chosen, ...CANNOT_TELL[cannotTellRuns++ % CANNOT_TELL.length] } : chosen;
  if (control === undefined && variant.refusesAll) {
    // Nothing names the caller: the helper refuses every call, naming "scope" (docs/mcp.md).
    for (const m of Object.values(scenario.meant)) m.expect = 'refused';
  }
  const db = join(dir, 'store.db');
  const tokens = new Tokens();
  const cleanups = [];
  let store;
  const sharedStore = () => (store ??= new parts.pkg.SqliteStore({ path: db, durability: 'normal' }));
  /** The payments server of one account's session (or of one request), in this process. */
  const build = ({ guard = 'server', options = {} } = {}) =>
    paymentsServer({ ...parts, store: sharedStore(), guard, options, control, ledgerDir: ledger.dir });

  let open;
  const v = variant.name;
  if (v === 'stdio') {
    open = async (caller) => {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [PAYMENTS, db, 'server', ...(control === undefined ? [] : [control])],
        // The account's own credentials configure its server (two accounts: two servers).
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', IDENTITY_LEDGER_DIR: ledger.dir, PAYMENTS_API_TOKEN: `secret-${caller}`, ...packageRootEnv() },
        cwd: ROOT,
        stderr: 'pipe',
      });
      transport.stderr?.on('data', () => {}); // drained
      return clientOver(transport, caller);
    };
  } else if (variant.http !== undefined) {
    const { auth, stateless = false } = variant.http;
    const http = await httpServer({ stateless, auth, tokens, build: () => build() });
    cleanups.push(() => http.close());
    open = async (caller) => {
      // The client sends its current token with every request (a refresh replaces it).
      const withToken = (url, init = {}) => {
        const headers = new Headers(init.headers);
        if (auth !== undefined) headers.set('authorization', `Bearer ${tokens.of(caller)}`);
        return fetch(url, { ...init, headers });
      };
      return clientOver(new StreamableHTTPClientTransport(http.url, { fetch: withToken }), caller);
    };
  } else {
    // The in-process transport: one McpServer per session, as a multi-user backend makes them.
    open = async (caller) => {
      let server;
      if (v === 'in-memory') server = build({ options: { scope: `acct-${caller}` } });
      else if (v === 'tool') server = build({ guard: 'tool' });
      else server = build();
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      if (v === 'in-memory-auth' || v === 'tool') {
        // What a transport behind bearer auth hands the server with every message: the verified token.
        const send = clientSide.send.bind(clientSide);
        clientSide.send = (message, options) => send(message, { ...options, authInfo: tokens.authInfo(tokens.of(caller)) });
      }
      await server.connect(serverSide);
      return clientOver(clientSide, caller);
    };
  }
  try {
    return await deliverRequests(scenario, {
      ledger,
      open,
      refresh: (caller) => tokens.refresh(caller),
      params: (call) => paramsOf(call, { keyAt: keyAt(variant) }),
    });
  } finally {
    for (const cleanup of cleanups) await cleanup();
    await store?.close();
  }
}

function packageRootEnv() {
  return process.env.IDENTITY_PACKAGE_ROOT ? { IDENTITY_PACKAGE_ROOT: process.env.IDENTITY_PACKAGE_ROOT } : {};
}
