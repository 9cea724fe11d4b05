// LangGraph.js: a tool that pays, next to a tool that asks a human (interrupt). ToolNode runs
// both as one task, so on resume it runs send_payment again; idempotentTool replays the charge.
//
//   node examples/langgraph/index.mjs      (offline: a scripted chat model, a temp SQLite file)
//
// Exits non-zero if the payment ran more than once.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { Command, END, MemorySaver, MessagesAnnotation, START, StateGraph, interrupt } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { SqliteStore } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/langgraph';
import { z } from 'zod';

const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-langgraph-'));
const store = new SqliteStore({ path: join(dir, 'store.db') });
const charges = [];

// The model asks for both tools at once, then answers.
class ScriptedModel extends BaseChatModel {
  _llmType() { return 'scripted'; }
  bindTools() { return this; }
  async _generate(messages) {
    const message = messages.at(-1).getType() === 'human'
      ? new AIMessage({ content: '', tool_calls: [
          { id: 'call_pay', name: 'send_payment', args: { orderId: 'o-42', cents: 1999 }, type: 'tool_call' },
          { id: 'call_ask', name: 'ask_human', args: { question: 'Ship it?' }, type: 'tool_call' },
        ] })
      : new AIMessage('Paid and shipped.');
    return { generations: [{ message, text: String(message.content) }] };
  }
}

const sendPayment = tool(
  idempotentTool(async function sendPayment({ orderId, cents }) {
    charges.push({ orderId, cents });
    return { chargeId: `ch_${charges.length}` };
  }, { store, onEvent: (e) => console.log(`  send_payment ${e.type} (tool call ${e.toolCallId})`) }),
  { name: 'send_payment', description: 'Charge an order', schema: z.object({ orderId: z.string(), cents: z.number() }) },
);
const askHuman = tool(async ({ question }) => interrupt(question), {
  name: 'ask_human', description: 'Ask a human', schema: z.object({ question: z.string() }),
});

const model = new ScriptedModel({});
const graph = new StateGraph(MessagesAnnotation)
  .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
  .addNode('tools', new ToolNode([sendPayment, askHuman]))
  .addEdge(START, 'agent')
  .addConditionalEdges('agent', (s) => (s.messages.at(-1).tool_calls?.length ? 'tools' : END))
  .addEdge('tools', 'agent')
  .compile({ checkpointer: new MemorySaver() });

const config = { configurable: { thread_id: 'order-42' } };
console.log('run 1 (interrupted by ask_human):');
const first = await graph.invoke({ messages: [new HumanMessage('Pay and ship order o-42')] }, config);
console.log(`  interrupt: ${first.__interrupt__[0].value}`);
// The first run's send_payment may still be in flight when the interrupt ends the run: the
// two calls share one key, one runs and the other waits for its result (the helpers use
// onDuplicate 'block'), so resuming right away is safe.
console.log('resume:');
const done = await graph.invoke(new Command({ resume: 'yes' }), config);
console.log(`  answer: ${done.messages.at(-1).content}`);

store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`charges: ${charges.length}`);
if (charges.length !== 1) {
  console.error('FAIL: the payment ran more than once');
  process.exit(1);
}
