// Vercel AI SDK: a tool that needs approval. The client submits the approved history twice
// (a double click, a retried request); the SDK runs the approved tool call each time, and
// idempotentTool replays the first charge.
//
//   node examples/ai-sdk/index.mjs      (offline: MockLanguageModelV3, a temp SQLite file)
//
// Exits non-zero if the payment ran more than once.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { SqliteStore } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/ai-sdk';
import { z } from 'zod';

const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-ai-sdk-'));
const store = new SqliteStore({ path: join(dir, 'store.db') });
const charges = [];

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) =>
    prompt.at(-1).role === 'user'
      ? { content: [{ type: 'tool-call', toolCallId: 'call_0', toolName: 'sendPayment', input: JSON.stringify({ orderId: 'o-42', cents: 1999 }) }],
          finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] }
      : { content: [{ type: 'text', text: 'Paid.' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] },
});

const tools = {
  sendPayment: tool({
    description: 'Charge an order',
    inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
    needsApproval: true,
    execute: idempotentTool(
      async function sendPayment({ orderId, cents }) {
        charges.push({ orderId, cents });
        return { chargeId: `ch_${charges.length}` };
      },
      {
        store,
        // The AI SDK has no conversation id: give yours (here through experimental_context).
        scope: (input, { experimental_context }) => experimental_context.chatId,
        onEvent: (e) => console.log(`  sendPayment ${e.type} (tool call ${e.toolCallId}, chat ${e.scope.chat})`), // e.scope: { chat, turn }
      },
    ),
  }),
};
const context = { chatId: 'chat-42' };

const messages = [{ role: 'user', content: 'Pay order o-42' }];
const first = await generateText({ model, tools, messages, experimental_context: context });
const approvals = first.content
  .filter((p) => p.type === 'tool-approval-request')
  .map((p) => ({ type: 'tool-approval-response', approvalId: p.approvalId, approved: true }));
const approved = [...messages, ...first.response.messages, { role: 'tool', content: approvals }];

for (const attempt of [1, 2]) {
  console.log(`submit approved history, attempt ${attempt}:`);
  const r = await generateText({ model, tools, messages: approved, experimental_context: context });
  console.log(`  answer: ${r.text}`);
}

store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`charges: ${charges.length}`);
if (charges.length !== 1) {
  console.error('FAIL: the payment ran more than once');
  process.exit(1);
}
