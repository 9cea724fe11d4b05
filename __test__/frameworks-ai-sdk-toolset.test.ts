// idempotentTools(toolSet, options) from idempotent-tools/ai-sdk: one line over a whole AI SDK
// tool set (ai 6 here, with experimental_context; ai 7's per-tool context runs in
// e2e/node22/ai-sdk-7.mjs), the real generateText, MockLanguageModelV3, real SqliteStore files.

import { createRequire } from 'node:module';

import { type ModelMessage, dynamicTool, generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTools }: typeof import('../dist/integrations/ai-sdk.js') = require(`${ROOT}/dist/integrations/ai-sdk.js`);
const { SqliteStore } = lib;

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** After n tool results in the prompt, calls `calls[n]` (each its own id), then answers with text. */
/** Calls in order, one a step, under ids a provider makes unique. */
function scriptedModel(calls: Array<{ toolName: string; input: object }>) {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const n = prompt.filter((m) => m.role === 'tool').length;
      const next = calls[n];
      const content = next
        ? [{ type: 'tool-call' as const, toolCallId: `call_${n}Qx7Vb2kLm9PzR4tN8sWc1eY`, toolName: next.toolName, input: JSON.stringify(next.input) }]
        : [{ type: 'text' as const, text: 'done' }];
      return { content, finishReason: { unified: next ? ('tool-calls' as const) : ('stop' as const), raw: undefined }, usage, warnings: [] };
    },
  });
}

function outputs(r: { steps: Array<{ content: Array<{ type: string; output?: unknown; error?: unknown }> }> }) {
  return r.steps.flatMap((s) => s.content).filter((p) => p.type === 'tool-result' || p.type === 'tool-error').map((p) => (p.type === 'tool-result' ? p.output : `error: ${String(p.error)}`));
}

describe('idempotentTools() over an AI SDK tool set', () => {
  it('the model calls again under a new id (business key): the charge runs once; read-only and client-side tools are left alone', async () => {
    const charges: unknown[] = [];
    let searches = 0;
    const raw = {
      sendPayment: tool({
        inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
        execute: async (input) => {
          charges.push(input);
          return { chargeId: `ch_${charges.length}` };
        },
      }),
      search: tool({ inputSchema: z.object({ q: z.string() }), execute: async () => ({ hits: ++searches }) }),
      askUser: tool({ inputSchema: z.object({ question: z.string() }) }), // client-side: no execute
    };
    const tools = idempotentTools(raw, {
      store: new SqliteStore({ path: tempDb() }),
      scope: (_input, { experimental_context }) => (experimental_context as { chatId: string }).chatId,
      readOnly: ['search'],
      tools: { sendPayment: { key: (input: { orderId: string }) => `order-${input.orderId}` } },
    });
    expect(tools.askUser).toBe(raw.askUser);
    expect(tools.search).toBe(raw.search);
    const model = scriptedModel([
      { toolName: 'search', input: { q: 'o-1' } },
      { toolName: 'sendPayment', input: { orderId: 'o-1', cents: 500 } },
      { toolName: 'search', input: { q: 'o-1' } },
      { toolName: 'sendPayment', input: { orderId: 'o-1', cents: 500 } }, // "the model called it again"
      { toolName: 'sendPayment', input: { orderId: 'o-1', cents: 900 } },
    ]);
    const messages: ModelMessage[] = [{ role: 'user', content: 'pay o-1' }];
    const r = await generateText({ model, tools, messages, experimental_context: { chatId: 'chat-1' }, stopWhen: () => false });
    const out = outputs(r);
    expect(charges).toHaveLength(1);
    expect(searches).toBe(2);
    expect(out[1]).toEqual({ chargeId: 'ch_1' });
    expect(out[3]).toEqual({ chargeId: 'ch_1' });
    expect(out[4]).toMatch(/^error: KeyMismatchError: .*tool "sendPayment".*business key "order-o-1"/);
  });

  it('covers dynamic tools (the shape of MCP client tools) and the same history submitted twice', async () => {
    let runs = 0;
    const mcpLike = { create_ticket: dynamicTool({ description: 'create', inputSchema: z.object({ title: z.string() }), execute: async () => ({ ticket: ++runs }) }) };
    const tools = idempotentTools(mcpLike, { store: new SqliteStore({ path: tempDb() }), scope: 'chat-2' });
    const model = scriptedModel([{ toolName: 'create_ticket', input: { title: 'broken' } }]);
    const messages: ModelMessage[] = [{ role: 'user', content: 'file it' }];
    const a = await generateText({ model, tools, messages });
    const b = await generateText({ model, tools, messages });
    expect(runs).toBe(1);
    expect(outputs(b)).toEqual(outputs(a));
  });

  it('a scope function that throws: the model gets a tool error and the developer a warning, both naming the tool and "scope"', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      let runs = 0;
      const tools = idempotentTools(
        { sendPayment: tool({ inputSchema: z.object({ orderId: z.string() }), execute: async () => ++runs }) },
        { store: new SqliteStore({ path: tempDb() }), scope: (_input, o) => (o.experimental_context as { chatId: string }).chatId },
      );
      const r = await generateText({ model: scriptedModel([{ toolName: 'sendPayment', input: { orderId: 'o' } }]), tools, messages: [{ role: 'user', content: 'pay' }] });
      expect(outputs(r)[0]).toMatch(/tool "sendPayment": the "scope" option threw: Cannot read properties of undefined \(reading 'chatId'\)/);
      expect(runs).toBe(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((w) => w.message).join('\n')).toMatch(/tool "sendPayment": the "scope" option threw/);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('refuses a missing scope and unknown tool names, naming them', () => {
    const t = { sendPayment: tool({ inputSchema: z.object({ q: z.string() }), execute: async () => 1 }) };
    expect(() => idempotentTools(t, {} as never)).toThrow(/tool "sendPayment".*needs a "scope" option/);
    expect(() => idempotentTools(t, { scope: 'c', tools: { sendPaymnet: { guard: false } } })).toThrow(/tool "sendPaymnet".*not in the tool set.*"sendPayment"/);
    expect(() => idempotentTools([] as never, { scope: 'c' })).toThrow(/takes a tool set.*not an array/);
  });
});
