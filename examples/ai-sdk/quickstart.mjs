import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { idempotentTools } from 'idempotent-tools/ai-sdk';

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

// A fake model: it pays order o-42, pays it again under a new tool call id, then answers.
const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
const pay = (id) => ({ content: [{ type: 'tool-call', toolCallId: id, toolName: 'sendPayment', input: '{"orderId":"o-42","cents":1999}' }], finishReason: { unified: 'tool-calls' }, usage, warnings: [] });
const model = new MockLanguageModelV3({ doGenerate: [pay('call_1'), pay('call_2'), { content: [{ type: 'text', text: 'Paid.' }], finishReason: { unified: 'stop' }, usage, warnings: [] }] });

const { text } = await generateText({ model, tools, prompt: 'Pay order o-42', stopWhen: stepCountIs(5) });
console.log(text, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
