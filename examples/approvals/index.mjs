// Approvals bound to one execution, in LangChain's createAgent: humanInTheLoopMiddleware
// decides, idempotentToolsMiddleware guards. The same turn is run twice (a retried request,
// a replay from a checkpoint) and answered differently the second time:
//   1. approve, then the turn again, approved: the payment runs once (the second replays it);
//   2. reject, then the turn again, approved: the payment never runs (the rejection is final);
//   3. edit (cents 50), then the turn again, approved as the model asked (cents 100): only the
//      edited payment runs; the other is refused, and the model is told why.
//
//   node examples/approvals/index.mjs      (offline: a scripted chat model, a temp SQLite file)
//
// Exits non-zero if a payment ran that was not approved, or more than once.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { Command, MemorySaver } from '@langchain/langgraph';
import { createAgent, humanInTheLoopMiddleware } from 'langchain';
import { SqliteStore } from 'idempotent-tools';
import { idempotentToolsMiddleware } from 'idempotent-tools/langchain';
import { z } from 'zod';

const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-approvals-'));
const store = new SqliteStore({ path: join(dir, 'store.db') });
const charges = [];

/** Asks to pay on the first turn (message ai-0, call call_0, as when a turn is run again), then answers in text. */
class ScriptedModel extends BaseChatModel {
  _llmType() { return 'scripted'; }
  bindTools() { return this; }
  async _generate(messages) {
    const first = !messages.some((m) => m.getType() === 'ai');
    const message = first
      ? new AIMessage({ id: 'ai-0', content: '', tool_calls: [{ id: 'call_0', name: 'send_payment', args: { orderId: 'o-42', cents: 100 }, type: 'tool_call' }] })
      : new AIMessage({ id: 'ai-1', content: 'Done.' });
    return { generations: [{ message, text: '' }] };
  }
}

const sendPayment = tool(
  async ({ orderId, cents }) => {
    charges.push({ orderId, cents });
    return `charged ${cents} for ${orderId}`;
  },
  { name: 'send_payment', description: 'Charge an order', schema: z.object({ orderId: z.string(), cents: z.number() }) },
);

const shown = new Set(['approved', 'edited', 'rejected', 'refused', 'approval-mismatch', 'executed', 'replayed']);
/** One worker's agent: its own checkpointer (its own copy of the thread), the shared store. */
const worker = () =>
  createAgent({
    model: new ScriptedModel({}),
    tools: [sendPayment],
    checkpointer: new MemorySaver(),
    middleware: [
      idempotentToolsMiddleware({ store, onEvent: (e) => shown.has(e.type) && console.log(`    event: ${e.type} (${e.toolCallId})`) }),
      humanInTheLoopMiddleware({ interruptOn: { send_payment: true } }),
    ],
  });

const answers = {
  approve: { decisions: [{ type: 'approve' }] },
  reject: { decisions: [{ type: 'reject', message: 'Not this order.' }] },
  edit: { decisions: [{ type: 'edit', editedAction: { name: 'send_payment', args: { orderId: 'o-42', cents: 50 } } }] },
};

/** Asks (the turn stops at the review), answers, and returns what the model got for the call. */
async function turn(agent, config, answer) {
  await agent.invoke({ messages: [new HumanMessage('Pay order o-42')] }, config);
  const out = await agent.invoke(new Command({ resume: answers[answer] }), config);
  return out.messages.filter((m) => m.getType() === 'tool').at(-1).content;
}

let ok = true;
for (const [n, first, again, want] of [[1, 'approve', 'approve', [100]], [2, 'reject', 'approve', []], [3, 'edit', 'approve', [50]]]) {
  charges.length = 0;
  console.log(`${n}. ${first}, then the same turn again, ${again}:`);
  const config = { configurable: { thread_id: `thread-${n}` } };
  console.log(`  the model got: ${await turn(worker(), config, first)}`);
  // The same turn once more, answered again: a retried request on another worker (its own
  // checkpoints, the same thread, message and call ids), or a replay from a checkpoint.
  console.log(`  the model got: ${await turn(worker(), config, again)}`);
  const ran = charges.map((c) => c.cents);
  console.log(`  payments: ${JSON.stringify(ran)} (want ${JSON.stringify(want)})`);
  ok &&= JSON.stringify(ran) === JSON.stringify(want);
}

await store.close();
rmSync(dir, { recursive: true, force: true });
process.exit(ok ? 0 : 1);
