// The Claude Agent SDK: a payment tool that needs the user's permission, an answer that
// edits the amount, and a session resumed on another worker that re-sends the call.
// Runs offline (a fake Messages API on 127.0.0.1; a temporary SQLite file):
//   node examples/claude-agent-sdk/index.mjs
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSdkMcpServer, query, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { SqliteStore } from 'idempotent-tools';
import { idempotentCanUseTool, idempotentTools } from 'idempotent-tools/claude-agent-sdk';
import { offlineClaude } from './offline-api.mjs';

const dir = mkdtempSync(join(tmpdir(), 'claude-example-'));
const store = new SqliteStore({ path: join(dir, 'store.db') });
const charges = []; // stands in for your payment API
const scope = 'conversation-7'; // your conversation (or user) id: the same on every worker

const sendPayment = tool('send_payment', 'Charge an order', { orderId: z.string(), cents: z.number() }, async ({ orderId, cents }) => {
  charges.push(cents);
  return { content: [{ type: 'text', text: `ch_${charges.length}: ${orderId} ${cents}` }] };
});
// Each worker builds its own server from the same guarded tools (a server serves one session at a time).
const tools = idempotentTools([sendPayment], {
  store,
  scope,
  onEvent: (e) => e.type === 'replayed' && console.log(`replayed ${e.name} for tool call ${e.toolCallId}`),
});

// The human's answer: allowed, for 15.00 instead of 19.99. A second ask (the resumed worker)
// would say something else; it is never asked: the first answer is bound to the call.
let asked = 0;
const canUseTool = idempotentCanUseTool(async (toolName, input) => {
  asked += 1;
  return asked === 1 ? { behavior: 'allow', updatedInput: { ...input, cents: 1500 } } : { behavior: 'deny', message: 'changed my mind' };
}, { store, scope });

const offline = await offlineClaude(); // a fake Messages API (offline-api.mjs): each prompt gets a call of send_payment, then "Paid."
const env = offline.env;
const worker = () => ({ env, cwd: offline.cwd, canUseTool, mcpServers: { pay: createSdkMcpServer({ name: 'pay', version: '1.0.0', tools }) } });

let sessionId;
for await (const m of query({ prompt: 'Pay order o-42', options: worker() })) sessionId = m.session_id ?? sessionId;
console.log(`first worker: charged ${charges.join(', ')} (the edited amount)`);
for await (const m of query({ prompt: 'Go on', options: { ...worker(), resume: sessionId } })) if (m.type === 'result') console.log(`resumed worker: ${m.result}`);
offline.close();
await store.close();
console.log(`asked the human: ${asked} time(s)`);
console.log(`charges: ${charges.length}`);
if (charges.length !== 1 || charges[0] !== 1500 || asked !== 1) process.exit(1);
