import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import { idempotentTools } from 'idempotent-tools/ai-sdk';
import { offlineModel } from './offline-model.mjs'; // a fake model; yours is a real one

let charges = 0; // stands in for your payment API
const chatId = 'chat-7'; // the AI SDK has no conversation id: scope the keys with yours

const tools = idempotentTools({
  sendPayment: tool({
    description: 'Charge an order',
    inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async ({ orderId, cents }) => ({ chargeId: `ch_${++charges}`, orderId, cents }),
  }),
}, {
  scope: chatId,
  // "The model called it again": the same order under a new tool call id is the same call.
  tools: { sendPayment: { key: (input) => `order-${input.orderId}` } },
});

const { text } = await generateText({ model: offlineModel(), tools, prompt: 'Pay order o-42', stopWhen: stepCountIs(5) });
console.log(text, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
