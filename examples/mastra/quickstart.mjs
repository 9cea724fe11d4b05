import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { idempotentTools } from 'idempotent-tools/mastra';
import { offlineModel } from './offline-model.mjs'; // a fake model; yours is a real one

let charges = 0; // stands in for your payment API
const tools = idempotentTools({
  sendPayment: createTool({
    id: 'send-payment',
    description: 'Charge an order',
    inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async ({ orderId, cents }) => ({ chargeId: `ch_${++charges}`, orderId, cents }),
  }),
}, {
  scope: 'conversation-7', // without it: the agent's memory thread
  // "The model called it again": the same order under a new tool call id is the same call.
  tools: { sendPayment: { key: (input) => `order-${input.orderId}` } },
});

const agent = new Agent({ id: 'payer', name: 'payer', instructions: 'Pay the orders you are asked to pay.', model: offlineModel(), tools });
const { text } = await agent.generate('Pay order o-42', { maxSteps: 5 });
console.log(text, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
