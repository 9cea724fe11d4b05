// idempotent-tools/ai-sdk end to end: the real `ai` package (generateText, tool approval),
// MockLanguageModelV3 from 'ai/test', real SqliteStore files.

import { createRequire } from 'node:module';

import { type ModelMessage, generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTool }: typeof import('../dist/integrations/ai-sdk.js') = require(`${ROOT}/dist/integrations/ai-sdk.js`);
const { SqliteStore } = lib;

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** Answers a user turn with the scripted tool calls, anything else with text. */
function fakeModel(calls: Array<{ id: string; input: object }>) {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      if (prompt.at(-1)?.role === 'user') {
        return {
          content: calls.map((c) => ({ type: 'tool-call' as const, toolCallId: c.id, toolName: 'send_payment', input: JSON.stringify(c.input) })),
          finishReason: { unified: 'tool-calls' as const, raw: undefined },
          usage,
          warnings: [],
        };
      }
      return { content: [{ type: 'text' as const, text: 'paid' }], finishReason: { unified: 'stop' as const, raw: undefined }, usage, warnings: [] };
    },
  });
}

function paymentTools(store: InstanceType<typeof SqliteStore>, scope: Parameters<typeof idempotentTool>[1]['scope'], payments: unknown[], events: string[]) {
  return {
    send_payment: tool({
      description: 'charge',
      inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
      needsApproval: true,
      execute: idempotentTool(
        async function sendPayment(input: { orderId: string; cents: number }) {
          payments.push(input);
          return { receipt: `r-${payments.length}` };
        },
        { store, scope, onEvent: (e) => events.push(e.type) },
      ),
    }),
  };
}

/** Runs the first turn, approves every request, and returns the approved history. */
async function approvedHistory(model: MockLanguageModelV3, tools: ReturnType<typeof paymentTools>, context?: unknown): Promise<ModelMessage[]> {
  const messages: ModelMessage[] = [{ role: 'user', content: 'pay order o-1' }];
  const first = await generateText({ model, tools, messages, experimental_context: context });
  const requests = first.content.filter((p) => p.type === 'tool-approval-request');
  expect(requests.length).toBeGreaterThan(0);
  return [
    ...messages,
    ...first.response.messages,
    { role: 'tool', content: requests.map((r) => ({ type: 'tool-approval-response' as const, approvalId: r.approvalId, approved: true })) },
  ];
}

function toolResults(r: { response: { messages: ModelMessage[] } }) {
  return r.response.messages.flatMap((m) => (m.role === 'tool' ? m.content : [])).filter((p) => p.type === 'tool-result') as Array<{ toolCallId: string; output: unknown }>;
}

describe('idempotent-tools/ai-sdk, end to end', () => {
  it('the same approved history submitted twice charges once; the second result is the first one', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    const events: string[] = [];
    const model = fakeModel([{ id: 'call_0', input: { orderId: 'o-1', cents: 1999 } }]);
    const tools = paymentTools(store, (_input, o) => (o.experimental_context as { chatId: string }).chatId, payments, events);
    const ctx = { chatId: 'chat-42' };
    const history = await approvedHistory(model, tools, ctx);
    expect(payments).toHaveLength(0);

    const a = await generateText({ model, tools, messages: history, experimental_context: ctx });
    const b = await generateText({ model, tools, messages: history, experimental_context: ctx }); // double submit
    expect(payments).toHaveLength(1);
    expect(events).toEqual(['approved', 'executed', 'replayed']); // the approval is recorded just before the run (docs/approvals.md)
    // The approved call's result goes back to the model in the first response message.
    expect(toolResults(a)).toEqual([expect.objectContaining({ toolCallId: 'call_0', output: { type: 'json', value: { receipt: 'r-1' } } })]);
    expect(toolResults(b)).toEqual(toolResults(a));
  });

  it('without the wrapper, the double submit charges twice (the scenario is real)', async () => {
    let charges = 0;
    const model = fakeModel([{ id: 'call_0', input: { orderId: 'o-1', cents: 1 } }]);
    const tools = {
      send_payment: tool({ inputSchema: z.object({ orderId: z.string(), cents: z.number() }), needsApproval: true, execute: async () => ++charges }),
    };
    const history = await approvedHistory(model, tools as never);
    await generateText({ model, tools, messages: history });
    await generateText({ model, tools, messages: history });
    expect(charges).toBe(2);
  });

  it('the same tool with different arguments in one step runs each; call ids are scoped per chat', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    const events: string[] = [];
    const model = fakeModel([
      { id: 'call_0', input: { orderId: 'o-1', cents: 1 } },
      { id: 'call_1', input: { orderId: 'o-2', cents: 2 } },
    ]);
    for (const chat of ['chat-a', 'chat-b']) {
      const tools = paymentTools(store, chat, payments, events); // a scope fixed per request
      await generateText({ model, tools, messages: await approvedHistory(model, tools) });
    }
    expect(payments).toHaveLength(4); // two orders, in two chats that both start at call_0
    expect(events.filter((e) => e !== 'approved')).toEqual(['executed', 'executed', 'executed', 'executed']);
    expect(events.filter((e) => e === 'approved')).toHaveLength(4); // each call's approval, recorded once
  });

  it('a missing scope is a clear TypeError, at wrap time or at call time', async () => {
    const fn = async function pay() { return 1; };
    expect(() => idempotentTool(fn, {} as never)).toThrow(/needs a "scope" option.*chatId/s);
    expect(() => idempotentTool(fn, undefined as never)).toThrow(TypeError);
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    const tools = paymentTools(store, (_i, o) => (o.experimental_context as { chatId?: string } | undefined)?.chatId, payments, []);
    const model = fakeModel([{ id: 'call_0', input: { orderId: 'o-1', cents: 1 } }]);
    const out = await generateText({ model, tools, messages: await approvedHistory(model, tools) }); // no experimental_context
    const [result] = toolResults(out);
    expect(result.output).toMatchObject({ type: 'error-text', value: expect.stringMatching(/"scope" option returned undefined.*experimental_context\.chatId/s) });
    expect(payments).toHaveLength(0);
  });

  it('called by hand without a toolCallId: a clear TypeError', async () => {
    const wrapped = idempotentTool(async function pay(input: { n: number }) { return input.n; }, { scope: 'chat', store: new SqliteStore({ path: tempDb() }) });
    await expect(wrapped({ n: 1 }, undefined as never)).rejects.toThrow(/without a toolCallId.*generateText/s);
    // Without messages nothing tells the call's turn (ids restart at call_0): refused, naming "key".
    await expect(wrapped({ n: 1 }, { toolCallId: 'c1' })).rejects.toMatchObject({ code: 'CANNOT_TELL', option: 'key', message: expect.stringMatching(/without options\.messages.*"?key"?/s) });
    await expect(wrapped({ n: 1 }, { toolCallId: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', messages: [{ role: 'user', content: 'pay 1' }] })).resolves.toBe(1);
    const keyed = idempotentTool(async function payKeyed(input: { n: number }) { return input.n; }, { scope: 'chat', key: (input) => `n-${input.n}`, store: new SqliteStore({ path: tempDb() }) });
    await expect(keyed({ n: 2 }, { toolCallId: 'c1' })).resolves.toBe(2);
  });
});
