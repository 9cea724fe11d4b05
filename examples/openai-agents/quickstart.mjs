import { Agent, run, tool } from '@openai/agents';
import { z } from 'zod';
import { idempotentTools } from 'idempotent-tools/openai-agents';
import { offlineModel } from './offline-model.mjs'; // a fake model; yours is a real one

let charges = 0; // stands in for your payment API, which is slower than the tool's timeout
const sendPayment = tool({
  name: 'send_payment',
  description: 'Charge an order',
  parameters: z.object({ orderId: z.string(), cents: z.number() }),
  timeoutMs: 1000, // the SDK tells the model "timed out" while the charge goes on
  execute: async ({ orderId }) => new Promise((done) => setTimeout(() => done(`ch_${++charges} for ${orderId}`), 1200)),
});

const agent = new Agent({
  name: 'payer',
  model: offlineModel(),
  tools: idempotentTools([sendPayment], {
    scope: (input, runContext) => runContext.context.conversationId,
    // "The model called it again": the same order under a new call id is the same call.
    tools: { send_payment: { key: (input) => `order-${input.orderId}` } },
  }),
});
const result = await run(agent, 'Pay order o-42', { context: { conversationId: 'conv-7' } });
console.log(result.finalOutput, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
