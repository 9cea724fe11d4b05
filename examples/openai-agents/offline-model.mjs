// A fake model for OpenAI Agents JS, so that examples/openai-agents/quickstart.mjs runs
// offline: it pays order o-42; told "timed out", it pays again under a new call id (as a
// model does); then answers. With a real model you need none of this.
import { Usage, setTracingDisabled } from '@openai/agents';

setTracingDisabled(true); // offline: no traces sent

export function offlineModel() {
  let turn = 0;
  const pay = { type: 'function_call', name: 'send_payment', arguments: '{"orderId":"o-42","cents":1999}', status: 'completed' };
  return {
    async getResponse() {
      turn += 1;
      const output = turn <= 2 ? [{ ...pay, callId: `call_${turn}` }]
        : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Paid.' }] }];
      return { usage: new Usage(), output };
    },
    async *getStreamedResponse() {},
  };
}
