// idempotent-tools/mcp-server's idempotentTool around fastmcp's `execute`, with the official
// MCP SDK client over stdio (issue 36, finding 6): 300 duplicates of a slow call wait for it;
// cancelled (notifications/cancelled), each stops waiting at once; 300 more, and the client
// closes its end: each stops too; the store is asked nothing more by any of them, and the
// first call completes once. fastmcp's context.signal is what tells the guard (it covers a
// cancel, and the session closing when stdin ends). Run by .ci/node22-e2e.sh.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const WAITERS = 300;
const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'e2e-fastmcp-waits-'));
const log = join(dir, 'charges.log');
const transport = new StdioClientTransport({ command: process.execPath, args: [join(here, 'fastmcp-slow.mjs'), join(dir, 'store.db'), log], stderr: 'pipe', cwd: here });
let stderr = '';
transport.stderr.on('data', (d) => (stderr += d));
const client = new Client({ name: 'e2e', version: '1.0.0' });
await client.connect(transport);
const child = transport._process;

const lines = (prefix) => stderr.split('\n').filter((l) => l.startsWith(prefix));
async function until(condition, what) {
  const deadline = Date.now() + 45_000;
  while (!condition()) {
    if (Date.now() > deadline) fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
function fail(why) {
  console.log(`FAIL fastmcp: abandoned waits: ${why}\n${stderr.split('\n').filter((l) => !/^(in-flight|ended)/.test(l)).join('\n')}`);
  child.kill('SIGKILL');
  process.exit(1);
}
const call = (signal) =>
  client.request({ method: 'tools/call', params: { name: 'slow_payment', arguments: { orderId: 'o-1' } } }, CallToolResultSchema, { ...(signal ? { signal } : {}), timeout: 600_000 });

const first = call().catch((err) => err);
await until(() => stderr.includes('started o-1'), 'the first call to start');
const controllers = Array.from({ length: WAITERS }, () => new AbortController());
const cancelled = controllers.map((c) => call(c.signal).catch((err) => err));
await until(() => lines('in-flight').length === WAITERS, `${WAITERS} duplicates to wait`);
for (const c of controllers) c.abort('the user gave up');
await until(() => lines('ended').length === WAITERS, `the ${WAITERS} cancelled waits to end`);
await Promise.all(cancelled);
// 300 more, and the client closes the server's stdin without cancelling them.
const left = Array.from({ length: WAITERS }, () => call().catch((err) => err));
await until(() => lines('in-flight').length === 2 * WAITERS, `${WAITERS} more duplicates to wait`);
child.stdin.end();
await until(() => lines('ended').length === 2 * WAITERS, `the ${WAITERS} waits of a client that left to end`);
void left;
const ended = lines('ended');
if (!ended.every((l) => l.startsWith('ended WAIT_ABANDONED '))) fail(`a wait ended otherwise: ${ended.find((l) => !l.startsWith('ended WAIT_ABANDONED'))}`);
const claimsWhenEnded = Math.max(...ended.map((l) => Number(l.split(' ')[2])));
writeFileSync(`${log}.release`, '');
await until(() => lines('executed').length === 1, 'the first call to complete');
const claimsAfter = Number(lines('executed')[0].split(' ')[1]);
await until(() => existsSync(log), 'the charge to be written');
const charges = readFileSync(log, 'utf8').trim().split('\n');
child.kill('SIGKILL');
void first;
const ok = charges.length === 1 && claimsAfter === claimsWhenEnded;
console.log(
  `${ok ? 'ok  ' : 'FAIL'} fastmcp: ${2 * WAITERS} waits of cancelled requests and of a client that left end at once; ` +
    `no claim after they ended (${claimsWhenEnded} before the first call's settle, ${claimsAfter} after); ${charges.length} charge(s)`,
);
process.exit(ok ? 0 : 1);
