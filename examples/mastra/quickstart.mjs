import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { idempotentTools } from 'idempotent-tools/mastra';

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

// A fake model: it pays order o-42, pays it again under a new tool call id, then answers.
let turn = 0;
const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };
const model = {
  specificationVersion: 'v2', provider: 'fake', modelId: 'fake', supportedUrls: {},
  doGenerate: async () => (++turn <= 2
    ? { content: [{ type: 'tool-call', toolCallId: `call_${turn}`, toolName: 'sendPayment', input: '{"orderId":"o-42","cents":1999}' }], finishReason: 'tool-calls', usage, warnings: [] }
    : { content: [{ type: 'text', text: 'Paid.' }], finishReason: 'stop', usage, warnings: [] }),
  doStream: async () => { throw new Error('this model does not stream'); },
};

const agent = new Agent({ id: 'payer', name: 'payer', instructions: 'Pay the orders you are asked to pay.', model, tools });
const { text } = await agent.generate('Pay order o-42', { maxSteps: 5 });
console.log(text, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
