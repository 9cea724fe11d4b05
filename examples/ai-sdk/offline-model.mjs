// A fake model (the AI SDK's MockLanguageModelV3), so that examples/ai-sdk/quickstart.mjs runs
// offline: it pays order o-42, pays it again under a new tool call id (a model re-planning),
// then answers. With a real model you need none of this.
import { MockLanguageModelV3 } from 'ai/test';

export function offlineModel() {
  const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
  const pay = (id) => ({ content: [{ type: 'tool-call', toolCallId: id, toolName: 'sendPayment', input: '{"orderId":"o-42","cents":1999}' }], finishReason: { unified: 'tool-calls' }, usage, warnings: [] });
  return new MockLanguageModelV3({ doGenerate: [pay('call_1'), pay('call_2'), { content: [{ type: 'text', text: 'Paid.' }], finishReason: { unified: 'stop' }, usage, warnings: [] }] });
}
