import { Agent, Usage, run, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { idempotentTools } from 'idempotent-tools/openai-agents';

setTracingDisabled(true); // offline
let charges = 0; // stands in for your payment API, which is slower than the tool's timeout
const sendPayment = tool({
  name: 'send_payment',
  description: 'Charge an order',
  parameters: z.object({ orderId: z.string(), cents: z.number() }),
  timeoutMs: 100, // the SDK tells the model "timed out" while the charge goes on
  execute: async ({ orderId }) => new Promise((done) => setTimeout(() => done(`ch_${++charges} for ${orderId}`), 150)),
});

// A fake model: it pays order o-42; told "timed out", it pays again under a new call id; then answers.
let turn = 0;
const pay = { type: 'function_call', name: 'send_payment', arguments: '{"orderId":"o-42","cents":1999}', status: 'completed' };
const model = {
  async getResponse() {
    turn += 1;
    const output = turn <= 2 ? [{ ...pay, callId: `call_${turn}` }]
      : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Paid.' }] }];
    return { usage: new Usage(), output };
  },
  async *getStreamedResponse() {},
};

const agent = new Agent({
  name: 'payer',
  model,
  tools: idempotentTools([sendPayment], {
    scope: (input, runContext) => runContext.context.conversationId,
    // "The model called it again": the same order under a new call id is the same call.
    tools: { send_payment: { key: (input) => `order-${input.orderId}` } },
  }),
});
const result = await run(agent, 'Pay order o-42', { context: { conversationId: 'conv-7' } });
console.log(result.finalOutput, `charged ${charges} time(s)`); // Paid. charged 1 time(s)
