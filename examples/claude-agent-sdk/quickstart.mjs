import { createSdkMcpServer, query, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { idempotentTools } from 'idempotent-tools/claude-agent-sdk';
import { offlineClaude } from './offline-api.mjs'; // a fake Messages API; yours is Anthropic's

let charges = 0; // stands in for your payment API
const sendPayment = tool('send_payment', 'Charge an order', { orderId: z.string(), cents: z.number() },
  async ({ orderId, cents }) => ({ content: [{ type: 'text', text: `ch_${++charges}: ${orderId} ${cents}` }] }));
const pay = createSdkMcpServer({ name: 'pay', version: '1.0.0', tools: idempotentTools([sendPayment]) });

const offline = await offlineClaude();
const options = { env: offline.env, cwd: offline.cwd, mcpServers: { pay }, allowedTools: ['mcp__pay__send_payment'] };
let sessionId, text;
for await (const m of query({ prompt: 'Pay order o-42', options })) sessionId = m.session_id ?? sessionId;
// The session resumed: its first turn re-sends the call. It replays; the card is not charged again.
for await (const m of query({ prompt: 'Go on', options: { ...options, resume: sessionId } })) if (m.type === 'result') text = m.result;
offline.close();
console.log(text, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
