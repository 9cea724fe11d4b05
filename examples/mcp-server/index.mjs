// An MCP server's own write tool, safe to retry: idempotentServer() over an McpServer.
// Runs offline (client and server in one process, on a temporary SQLite file):
//   node examples/mcp-server/index.mjs
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { SqliteStore } from 'idempotent-tools';
import { idempotentServer } from 'idempotent-tools/mcp-server';

const store = new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'mcp-server-')), 'store.db') });
let charges = 0; // stands in for your payment API

const server = idempotentServer(new McpServer({ name: 'payments', version: '1.0.0' }), {
  store,
  // Who is calling. By default the verified account (extra.authInfo.extra.sub, as your token
  // verifier sets it over Streamable HTTP) or, on stdio, the user who started the server; an
  // in-process transport like this one names nobody, so it is said here: one user.
  scope: 'example-user',
});
server.registerTool('send_payment', {
  description: 'Charge an order. Send _meta.idempotencyKey to make a retry safe.',
  inputSchema: { orderId: z.string(), cents: z.number() },
}, async ({ orderId, cents }) => ({ content: [{ type: 'text', text: `charged ${orderId} ${cents} (ch_${++charges})` }] }));
server.registerTool('balance', { annotations: { readOnlyHint: true } }, async () => ({ content: [{ type: 'text', text: '100' }] }));

const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
await server.connect(serverSide);
const client = new Client({ name: 'example', version: '1.0.0' });
await client.connect(clientSide);

const call = { name: 'send_payment', arguments: { orderId: 'o-42', cents: 1999 }, _meta: { idempotencyKey: 'order-o-42' } };
const first = await client.callTool(call);
const retry = await client.callTool(call); // the client timed out and sent it again
console.log(first.content[0].text);
console.log(retry.content[0].text, retry._meta?.['idempotent-tools/replayed'] ? '(replayed)' : '');
try {
  await client.callTool({ ...call, arguments: { orderId: 'o-42', cents: 5 } }); // the same key, other arguments
} catch (err) {
  console.log(`refused: ${err.code} ${err.data['idempotent-tools']}`);
}
console.log(`charges: ${charges}`);
await client.close();
await store.close();
if (charges !== 1) process.exit(1);
