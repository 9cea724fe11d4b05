// LangGraph.js: confirm, act, confirm, act inside one tool. interrupt() ends the run; on
// resume LangGraph runs the tool again from its first line, so each side effect sits in a
// step(): on the second resume the first transfer returns its stored result.
//
//   node examples/langgraph/confirm-act.mjs      (offline: a scripted chat model, a temp SQLite file)
//
// Exits non-zero if a transfer ran more than once.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { Command, END, MemorySaver, MessagesAnnotation, START, StateGraph, interrupt } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { SqliteStore, currentKey, step } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/langgraph';
import { z } from 'zod';

const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-confirm-act-'));
const store = new SqliteStore({ path: join(dir, 'store.db') });
const bank = []; // what the bank did, with the idempotency key each request carried

class ScriptedModel extends BaseChatModel {
  _llmType() { return 'scripted'; }
  async _generate(messages) {
    const message = messages.at(-1).getType() === 'human'
      ? new AIMessage({ content: '', tool_calls: [{ id: 'call_1', name: 'transfer', args: { to: 'bob', cents: 500 }, type: 'tool_call' }] })
      : new AIMessage(`Done: ${messages.at(-1).content}`);
    return { generations: [{ message, text: String(message.content) }] };
  }
}

const transfer = tool(
  idempotentTool(async function transfer({ to, cents }) {
    if (interrupt(`Send ${cents} to ${to}?`) !== 'yes') return 'cancelled';
    const payment = await step('payment', async () => {
      bank.push({ to, cents, key: currentKey() });
      return `tr_${bank.length}`;
    });
    if (interrupt('Also pay the 100 fee?') !== 'yes') return { payment };
    const fee = await step('fee', async () => {
      bank.push({ to: 'bank', cents: 100, key: currentKey() });
      return `tr_${bank.length}`;
    });
    return { payment, fee };
  }, { store }),
  { name: 'transfer', description: 'Send money', schema: z.object({ to: z.string(), cents: z.number() }) },
);

const model = new ScriptedModel({});
const graph = new StateGraph(MessagesAnnotation)
  .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
  .addNode('tools', new ToolNode([transfer]))
  .addEdge(START, 'agent')
  .addConditionalEdges('agent', (s) => (s.messages.at(-1).tool_calls?.length ? 'tools' : END))
  .addEdge('tools', 'agent')
  .compile({ checkpointer: new MemorySaver() });

const config = { configurable: { thread_id: 'transfer-1' } };
let out = await graph.invoke({ messages: [new HumanMessage('Send bob 5 dollars')] }, config);
while (out.__interrupt__?.length) {
  console.log(`  asked: ${out.__interrupt__[0].value}  -> yes`);
  out = await graph.invoke(new Command({ resume: 'yes' }), config);
  console.log(`  transfers so far: ${bank.length}`);
}
console.log(`  answer: ${out.messages.at(-1).content}`);

store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`transfers: ${bank.length}`);
if (bank.length !== 2 || bank[0].key === bank[1].key) {
  console.error('FAIL: a transfer ran more than once (or two steps shared a key)');
  process.exit(1);
}
