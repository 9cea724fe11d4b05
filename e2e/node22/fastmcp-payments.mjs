// A fastmcp server whose payment tool is guarded by idempotent-tools/mcp-server's idempotentTool.
//   node fastmcp-payments.mjs <store.db> <charges.log>
import { appendFileSync } from 'node:fs';
import { FastMCP } from 'fastmcp';
import { z } from 'zod';
import { SqliteStore } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/mcp-server';

const [db, log] = process.argv.slice(2);
const store = new SqliteStore({ path: db });
const server = new FastMCP({ name: 'payments', version: '1.0.0' });
server.addTool({
  name: 'send_payment',
  parameters: z.object({ orderId: z.string(), cents: z.number() }),
  execute: idempotentTool(async ({ orderId, cents }) => {
    appendFileSync(log, `${orderId} ${cents}\n`);
    return `charged ${orderId} ${cents}`;
  }, { name: 'send_payment', store, scope: 'local' }), // stdio: one user, the one who started it
});
await server.start({ transportType: 'stdio' });
