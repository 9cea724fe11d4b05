// idempotent-tools/mcp-server's idempotentTool around fastmcp's `execute`, with the official
// MCP SDK client over stdio: a repeated call runs once and gets the first answer. fastmcp
// 4.x depends on mcp-proxy, whose pipenet declares Node >= 22, so it is installed here,
// apart from the main devDependencies (which stay on what Node 20 installs). Run by
// .ci/node22-e2e.sh, with this clone's build.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'e2e-fastmcp-'));
const log = join(dir, 'charges.log');
const transport = new StdioClientTransport({ command: process.execPath, args: [join(here, 'fastmcp-payments.mjs'), join(dir, 'store.db'), log], stderr: 'inherit', cwd: here });
const client = new Client({ name: 'e2e', version: '1.0.0' });
await client.connect(transport);
const args = { orderId: 'o-42', cents: 1999 };
const first = await client.callTool({ name: 'send_payment', arguments: args });
const again = await client.callTool({ name: 'send_payment', arguments: args });
await client.close();
const charges = readFileSync(log, 'utf8').trim().split('\n');
const ok = JSON.stringify(again.content) === JSON.stringify(first.content) && JSON.stringify(first.content).includes('charged o-42 1999') && charges.length === 1;
console.log(`${ok ? 'ok  ' : 'FAIL'} fastmcp: a repeated call runs once and gets the first answer (${charges.length} charge(s))`);
process.exit(ok ? 0 : 1);
