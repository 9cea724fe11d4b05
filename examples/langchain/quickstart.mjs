import { AIMessage, createAgent, fakeModel, tool } from 'langchain';
import { Command, MemorySaver, interrupt } from '@langchain/langgraph';
import { z } from 'zod';
import { step } from 'idempotent-tools';
import { idempotentToolsMiddleware } from 'idempotent-tools/langchain';

let charges = 0; // stands in for your payment API
const sendPayment = tool(async ({ orderId, cents }) => {
  // A tool runs again from its first line on resume: a side effect before interrupt() goes in a step.
  const chargeId = await step('charge', async () => `ch_${++charges}`);
  const receipt = interrupt(`Charged ${cents} for ${orderId}. Email the receipt?`);
  return `${chargeId}, receipt: ${receipt}`;
}, { name: 'send_payment', description: 'Charge an order', schema: z.object({ orderId: z.string(), cents: z.number() }) });

// A fake model: it pays order o-42, then (a re-plan) pays it again under a new tool call id.
const order = { name: 'send_payment', args: { orderId: 'o-42', cents: 1999 } };
const model = fakeModel().respondWithTools([{ ...order, id: 'call_1' }]).respondWithTools([{ ...order, id: 'call_2' }]).respond(new AIMessage('Paid.'));

// "The model called it again": with a business key, the same order under a new tool call id is the same call.
const middleware = [idempotentToolsMiddleware({ tools: { send_payment: { key: (input) => `order-${input.orderId}` } } })];
const agent = createAgent({ model, tools: [sendPayment], checkpointer: new MemorySaver(), middleware });
const thread = { configurable: { thread_id: 'thread-7' } };
await agent.invoke({ messages: [{ role: 'user', content: 'Pay order o-42' }] }, thread); // stops at interrupt()
const out = await agent.invoke(new Command({ resume: 'yes' }), thread);
console.log(out.messages.at(-1).content, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
