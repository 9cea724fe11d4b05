import { createServer } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSdkMcpServer, query, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { idempotentTools } from 'idempotent-tools/claude-agent-sdk';

let charges = 0; // stands in for your payment API
const sendPayment = tool('send_payment', 'Charge an order', { orderId: z.string(), cents: z.number() },
  async ({ orderId, cents }) => ({ content: [{ type: 'text', text: `ch_${++charges}: ${orderId} ${cents}` }] }));
const pay = createSdkMcpServer({ name: 'pay', version: '1.0.0', tools: idempotentTools([sendPayment]) });

// A fake Messages API (offline): every prompt gets a call of send_payment, id toolu_01 (on
// resume, the re-sent assistant message that made it), then "Paid.".
const api = createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  const { tools = [], messages } = JSON.parse(body);
  const sinceReply = JSON.stringify(messages.slice(messages.findLastIndex((m) => m.role === 'assistant') + 1));
  const prompt = tools.length > 0 && /Pay order|Go on/.test(sinceReply) && !sinceReply.includes('tool_result');
  const block = prompt
    ? { type: 'tool_use', id: 'toolu_01', name: 'mcp__pay__send_payment', input: {}, json: '{"orderId":"o-42","cents":1999}' }
    : { type: 'text', text: '', delta: 'Paid.' };
  const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 1, output_tokens: 1 } } });
  const { json, delta, ...start } = block;
  event('content_block_start', { index: 0, content_block: start });
  event('content_block_delta', { index: 0, delta: json ? { type: 'input_json_delta', partial_json: json } : { type: 'text_delta', text: delta } });
  event('content_block_stop', { index: 0 });
  event('message_delta', { delta: { stop_reason: prompt ? 'tool_use' : 'end_turn' }, usage: { output_tokens: 1 } });
  event('message_stop', {});
  res.end();
}).listen(0, '127.0.0.1');
await new Promise((r) => api.once('listening', r));
const home = mkdtempSync(join(tmpdir(), 'claude-'));
const env = { ...process.env, HOME: home, ANTHROPIC_API_KEY: 'offline',
  ANTHROPIC_BASE_URL: `http://127.0.0.1:${api.address().port}`, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' };

const options = { env, cwd: home, mcpServers: { pay }, allowedTools: ['mcp__pay__send_payment'] };
let sessionId, text;
for await (const m of query({ prompt: 'Pay order o-42', options })) sessionId = m.session_id ?? sessionId;
// The session resumed: its first turn re-sends the call. It replays; the card is not charged again.
for await (const m of query({ prompt: 'Go on', options: { ...options, resume: sessionId } })) if (m.type === 'result') text = m.result;
api.close();
console.log(text, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
