// A fake model (an AI SDK v2 model object, as Mastra takes one), so that
// examples/mastra/quickstart.mjs runs offline: it pays order o-42, pays it again under a new
// tool call id (a model re-planning), then answers. With a real model you need none of this.
export function offlineModel() {
  let turn = 0;
  const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };
  return {
    specificationVersion: 'v2', provider: 'fake', modelId: 'fake', supportedUrls: {},
    doGenerate: async () => (++turn <= 2
      ? { content: [{ type: 'tool-call', toolCallId: `call_${turn}`, toolName: 'sendPayment', input: '{"orderId":"o-42","cents":1999}' }], finishReason: 'tool-calls', usage, warnings: [] }
      : { content: [{ type: 'text', text: 'Paid.' }], finishReason: 'stop', usage, warnings: [] }),
    doStream: async () => { throw new Error('this model does not stream'); },
  };
}
