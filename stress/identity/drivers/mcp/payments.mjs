// The identity harness's MCP server: an McpServer (the official SDK's) with one write tool,
// `pay`, whose side effect is a line in the identity ledger and whose result carries its
// receipt. Built in the driver's process (Streamable HTTP, the in-process transport), or run
// as a child process on its own stdio:
//
//   node payments.mjs <store.db> server|plain [id|args]
//
// `server`: guarded by idempotentServer (no options: on its own stdio it tells its caller by
// itself); `plain`: unguarded (what the MCP proxy is put in front of); a third argument
// guards the tool with a control (controls.js) instead. The ledger's folder comes from
// IDENTITY_LEDGER_DIR; the package from IDENTITY_PACKAGE_ROOT, else this repository.

import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(here, '..', '..', '..', '..');
const require = createRequire(import.meta.url);
const { recordSideEffect } = require('../../ledger.js');
const { controlled } = require('../../controls.js');

/** Where an agent runtime puts the model's tool call id in `_meta` (Claude Code, the Claude Agent SDK). */
export const TOOL_USE_ID = 'claudecode/toolUseId';

/** The tool call id a call came with: the runtime's, in `_meta` (none: null). */
export function toolCallIdOf(extra) {
  const id = extra?._meta?.[TOOL_USE_ID];
  return typeof id === 'string' ? id : null;
}

/**
 * The payments server. `guard`: 'server' (idempotentServer(server, options)), 'tool'
 * (idempotentTool(handler, { name: 'pay', ...options })) or 'plain'; `control`: 'id' or
 * 'args' guards the handler with controls.js instead (keyed by the tool call id alone, or
 * by the arguments alone). `ledgerDir`: the ledger's folder (default IDENTITY_LEDGER_DIR).
 */
export function paymentsServer({ McpServer, z, pkg, helper, store, guard, options = {}, control, ledgerDir }) {
  const server = new McpServer({ name: 'payments', version: '1.0.0' });
  const pay = async (args, toolCallId) => {
    const receipt = recordSideEffect({ toolCallId, args }, ledgerDir);
    return { content: [{ type: 'text', text: `paid ${args.orderId} ${args.cents}: ${receipt}` }] };
  };
  let handler = async (args, extra) => pay(args, toolCallIdOf(extra));
  if (control !== undefined) {
    // The id a control keys by: the runtime's tool call id, else the JSON-RPC request's.
    const guarded = controlled(control, pay, { idempotent: pkg.idempotent, store, name: 'pay' });
    handler = async (args, extra) => guarded(args, toolCallIdOf(extra) ?? String(extra.requestId));
  } else if (guard === 'tool') handler = helper.idempotentTool(handler, { name: 'pay', store, ...options });
  server.registerTool('pay', { description: 'Pays an order (once)', inputSchema: { orderId: z.string(), cents: z.number() } }, handler);
  if (control === undefined && guard === 'server') helper.idempotentServer(server, { store, ...options });
  return server;
}

/**
 * The SDK, zod and (`withPackage`) the package: the repository's build, or
 * IDENTITY_PACKAGE_ROOT's. An unguarded server (the proxy's upstream) loads no package.
 */
export function repositoryParts({ withPackage = true } = {}) {
  const packageRoot = process.env.IDENTITY_PACKAGE_ROOT || ROOT;
  return {
    McpServer: require('@modelcontextprotocol/sdk/server/mcp.js').McpServer,
    z: require('zod').z,
    ...(withPackage ? { pkg: require(packageRoot), helper: require(join(packageRoot, 'dist', 'integrations', 'mcp-server.js')) } : {}),
  };
}

// Run as a stdio server.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [db, guard, control] = process.argv.slice(2);
  if (db === undefined || !['server', 'plain'].includes(guard)) {
    process.stderr.write('usage: node payments.mjs <store.db> server|plain [id|args]\n');
    process.exit(2);
  }
  process.removeAllListeners('warning'); // the helper's refusals are warned of; the harness reads the answers
  const plain = guard === 'plain' && control === undefined;
  const parts = repositoryParts({ withPackage: !plain });
  const store = plain ? undefined : new parts.pkg.SqliteStore({ path: db, durability: 'normal' });
  const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
  await paymentsServer({ ...parts, store, guard, control }).connect(new StdioServerTransport());
  // The client closed its end: done (the store's handle would keep the process up).
  process.stdin.on('end', () => {
    Promise.resolve(store?.close()).finally(() => process.exit(0));
  });
}
