// LangChain createAgent: one middleware guards every tool of the agent. The model pays an
// order, then (a re-plan) calls the tool again under a new tool call id; the business key
// (`key`) makes the second call a replay of the first. toolRetryMiddleware sits beside it.
//
//   node examples/langchain/index.mjs      (offline: a scripted chat model, a temp SQLite file)
//
// Exits non-zero if the payment ran more than once.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { MemorySaver } from '@langchain/langgraph';
import { createAgent, toolRetryMiddleware } from 'langchain';
import { SqliteStore } from 'idempotent-tools';
import { idempotentToolsMiddleware } from 'idempotent-tools/langchain';
import { z } from 'zod';

const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-langchain-'));
const store = new SqliteStore({ path: join(dir, 'store.db') });
const charges = [];

// Turn n calls send_payment under id call_n (the same order twice), then answers.
class ScriptedModel extends BaseChatModel {
  _llmType() { return 'scripted'; }
  bindTools() { return this; }
  async _generate(messages) {
    const n = messages.filter((m) => m.getType() === 'ai').length;
    const message = n < 2
      ? new AIMessage({ id: `ai-${n}`, content: '', tool_calls: [{ id: `call_${n + 1}`, name: 'send_payment', args: { orderId: 'o-42', cents: 1999 }, type: 'tool_call' }] })
      : new AIMessage({ id: `ai-${n}`, content: 'Paid.' });
    return { generations: [{ message, text: '' }] };
  }
}

const sendPayment = tool(
  async ({ orderId, cents }) => {
    charges.push({ orderId, cents });
    return `charged ${cents} for ${orderId} (ch_${charges.length})`;
  },
  { name: 'send_payment', description: 'Charge an order', schema: z.object({ orderId: z.string(), cents: z.number() }) },
);

const agent = createAgent({
  model: new ScriptedModel({}),
  tools: [sendPayment],
  checkpointer: new MemorySaver(),
  middleware: [
    idempotentToolsMiddleware({
      store,
      tools: { send_payment: { key: (input) => `order-${input.orderId}` } }, // the business key
      onEvent: (e) => console.log(`  send_payment ${e.type} (call ${e.toolCallId})`),
    }),
    toolRetryMiddleware(),
  ],
});

const out = await agent.invoke({ messages: [new HumanMessage('Pay order o-42')] }, { configurable: { thread_id: 'thread-42' } });
for (const m of out.messages.filter((m) => m.getType() === 'tool')) console.log(`  ${m.tool_call_id}: ${m.content}`);

store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`charges: ${charges.length}`);
if (charges.length !== 1) {
  console.error('FAIL: the payment ran more than once');
  process.exit(1);
}
