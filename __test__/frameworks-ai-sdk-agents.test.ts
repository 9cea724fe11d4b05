// idempotent-tools/ai-sdk in agents shaped the way users write them: the real `ai` package
// (generateText, streamText, preliminary results, abort), MockLanguageModelV3, real SqliteStore files.

import { createRequire } from 'node:module';

import { type ModelMessage, generateText, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTool }: typeof import('../dist/integrations/ai-sdk.js') = require(`${ROOT}/dist/integrations/ai-sdk.js`);
const { SqliteStore, currentKey } = lib;

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** A provider's unique call id (OpenAI's shape), for tests that are not about ids. */
const UNIQUE_ID = 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd';

/**
 * A chat's opening exchange: with ids a provider numbers, a call whose history shows no
 * earlier answer cannot be told from a later request in the same words (issue 36), so the
 * tests of numbered ids start their chats after a greeting.
 */
const GREETING: ModelMessage[] = [
  { role: 'user', content: 'hi' },
  { role: 'assistant', content: 'Hello, how can I help?' },
];

/** A model that answers every user turn with one call of `toolName`, id `call_0` (a provider that restarts ids every turn) unless another id is given. */
function fakeModel(toolName: string, input: object, id = 'call_0') {
  const answer = (prompt: Array<{ role: string }>) =>
    prompt.at(-1)?.role === 'user'
      ? [{ type: 'tool-call' as const, toolCallId: id, toolName, input: JSON.stringify(input) }]
      : [{ type: 'text' as const, text: 'done' }];
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const content = answer(prompt);
      return { content, finishReason: { unified: content[0].type === 'text' ? ('stop' as const) : ('tool-calls' as const), raw: undefined }, usage, warnings: [] };
    },
    doStream: async ({ prompt }) => {
      const content = answer(prompt);
      const parts = content.map((c) => (c.type === 'text' ? [{ type: 'text-start' as const, id: 't' }, { type: 'text-delta' as const, id: 't', delta: c.text }, { type: 'text-end' as const, id: 't' }] : [c])).flat();
      return {
        stream: convertArrayToReadableStream([
          ...parts,
          { type: 'finish' as const, finishReason: { unified: content[0].type === 'text' ? ('stop' as const) : ('tool-calls' as const), raw: undefined }, usage },
        ]),
      };
    },
  });
}

function toolResults(r: { response: { messages: ModelMessage[] } }) {
  return r.response.messages.flatMap((m) => (m.role === 'tool' ? m.content : [])).filter((p) => p.type === 'tool-result') as Array<{ toolCallId: string; output: unknown }>;
}

describe('idempotent-tools/ai-sdk in agents', () => {
  it('call_0 reused every turn: turn 7\'s identical call runs; a resubmitted turn replays', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const sent: string[] = [];
    const tools = {
      send_email: tool({
        inputSchema: z.object({ to: z.string(), text: z.string() }),
        execute: idempotentTool(async function sendEmail(input: { to: string; text: string }) {
          sent.push(`${input.to}: ${input.text}`);
          return `sent ${sent.length}`;
        }, { store, scope: 'chat-1' }),
      }),
    };
    const model = fakeModel('send_email', { to: 'bob', text: 'hi' });
    const messages: ModelMessage[] = [...GREETING];
    for (let turn = 1; turn <= 7; turn++) {
      messages.push({ role: 'user', content: `turn ${turn}` });
      const before = [...messages];
      const r = await generateText({ model, tools, messages });
      messages.push(...r.response.messages);
      if (turn === 7) {
        const again = await generateText({ model, tools, messages: before }); // the same turn submitted twice
        expect(toolResults(again)).toEqual(toolResults(r));
      }
    }
    expect(sent).toHaveLength(7);
  });

  it('call_0 reused every turn with the same words, the history trimmed to its last messages: each turn runs; a resubmitted turn replays (issue 29, item 1)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const sent: string[] = [];
    const tools = {
      send_email: tool({
        inputSchema: z.object({ to: z.string(), text: z.string() }),
        execute: idempotentTool(async function sendEmail(input: { to: string; text: string }) {
          sent.push(input.to);
          return `sent ${sent.length}`;
        }, { store, scope: 'chat-1' }),
      }),
    };
    const model = fakeModel('send_email', { to: 'bob', text: 'hi' });
    let history: ModelMessage[] = [...GREETING];
    for (let turn = 1; turn <= 4; turn++) {
      const messages: ModelMessage[] = [...history, { role: 'user', content: 'email bob' }].slice(-6); // the chat keeps 6 messages
      // Steps until the model answers in text ('done'): every turn ends alike.
      const r = await generateText({ model, tools, messages, stopWhen: stepCountIs(3) });
      const again = await generateText({ model, tools, messages, stopWhen: stepCountIs(3) }); // the same request, retried
      expect(toolResults(again)).toEqual(toolResults(r));
      history = [...messages, ...r.response.messages];
    }
    expect(sent).toHaveLength(4);
  });

  it.each([
    ['results that differ only in an "id"', (n: number) => ({ id: `pay_${n}`, status: 'paid' })],
    ['identical results', (_n: number) => ({ status: 'paid' })],
  ])('call_0 in steps 1 to 3 of one generation, same input (%s): three payments; the request retried replays all three (issue 36, finding 3)', async (_what, receipt) => {
    const store = new SqliteStore({ path: tempDb() });
    let paid = 0;
    const tools = {
      send_payment: tool({
        inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
        execute: idempotentTool(async function sendPayment() {
          return receipt(++paid);
        }, { store, scope: 'chat-1' }),
      }),
    };
    // A provider that restarts ids every step: call_0 three times, then text.
    let steps = 0;
    const model = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) => {
        const calls = prompt.slice(prompt.findLastIndex((m) => m.role === 'user')).filter((m) => m.role === 'assistant').length;
        steps++;
        const content =
          calls < 3
            ? [{ type: 'tool-call' as const, toolCallId: 'call_0', toolName: 'send_payment', input: JSON.stringify({ orderId: 'o-1', cents: 500 }) }]
            : [{ type: 'text' as const, text: 'paid three times' }];
        return { content, finishReason: { unified: calls < 3 ? ('tool-calls' as const) : ('stop' as const), raw: undefined }, usage, warnings: [] };
      },
    });
    const messages: ModelMessage[] = [...GREETING, { role: 'user', content: 'pay order o-1 three times, one payment per step' }];
    const first = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
    expect(paid).toBe(3);
    const retried = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
    expect(paid).toBe(3);
    expect(toolResults(retried)).toEqual(toolResults(first));
    expect(steps).toBe(8);
  });

  it('call_0 every turn, the same words and the same result, the history capped: a turn that repeats the last one word for word is refused, naming "key", never replayed (issue 36)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let sent = 0;
    const tools = {
      send_email: tool({
        inputSchema: z.object({ to: z.string(), text: z.string() }),
        execute: idempotentTool(async function sendEmail() {
          sent++;
          return 'sent';
        }, { store, scope: 'chat-1' }),
      }),
    };
    const model = fakeModel('send_email', { to: 'bob', text: 'hi' });
    let history: ModelMessage[] = [...GREETING];
    const outputs: unknown[] = [];
    for (let turn = 1; turn <= 3; turn++) {
      const messages: ModelMessage[] = [...history, { role: 'user', content: 'email bob' }].slice(-6);
      const r = await generateText({ model, tools, messages, stopWhen: stepCountIs(3) });
      outputs.push(toolResults(r)[0].output);
      history = [...messages, ...r.response.messages];
    }
    // Turns 1 and 2 differ (turn 2 starts at turn 1's call); turn 3 reads exactly as turn 2.
    expect(sent).toBe(2);
    expect(outputs.slice(0, 2)).toEqual([{ type: 'text', value: 'sent' }, { type: 'text', value: 'sent' }]);
    expect(outputs[2]).toEqual({ type: 'error-text', value: expect.stringMatching(/word for word.*business key/s) });
    // A business key tells them apart: each request is its own call.
    const keyed = { send_email: tool({ inputSchema: z.object({ to: z.string(), text: z.string() }), execute: idempotentTool(async function sendEmailKeyed() { sent++; return 'sent'; }, { store, scope: 'chat-2', key: () => `email-${sent}` }) }) };
    const r = await generateText({ model, tools: keyed, messages: [...history, { role: 'user', content: 'email bob' }].slice(-6), stopWhen: stepCountIs(3) });
    expect(toolResults(r)[0].output).toEqual({ type: 'text', value: 'sent' });
  });

  it('ids a provider numbers, in a history that shows no earlier answer: refused on every request, naming "key"; a unique id or a business key runs once (issue 36)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let paid = 0;
    const payTool = (options: Record<string, unknown>) => ({
      pay: tool({ inputSchema: z.object({ orderId: z.string() }), execute: idempotentTool(async function pay() { return `paid #${++paid}`; }, { store, scope: 'chat-1', ...options }) }),
    });
    // An app that sends only the last message: every request reads the same.
    const messages: ModelMessage[] = [{ role: 'user', content: 'pay order o-1' }];
    for (let i = 0; i < 2; i++) {
      const r = await generateText({ model: fakeModel('pay', { orderId: 'o-1' }), tools: payTool({}), messages });
      expect(toolResults(r)[0].output).toEqual({ type: 'error-text', value: expect.stringMatching(/numbers.*no earlier answer.*business key/s) });
    }
    expect(paid).toBe(0);
    const unique = await generateText({ model: fakeModel('pay', { orderId: 'o-1' }, UNIQUE_ID), tools: payTool({}), messages });
    const keyed = payTool({ name: 'payKeyed', key: (input: { orderId: string }) => `order-${input.orderId}` });
    const first = await generateText({ model: fakeModel('pay', { orderId: 'o-1' }), tools: keyed, messages });
    const again = await generateText({ model: fakeModel('pay', { orderId: 'o-1' }), tools: keyed, messages });
    expect([toolResults(unique)[0].output, toolResults(first)[0].output, toolResults(again)[0].output]).toEqual([
      { type: 'text', value: 'paid #1' },
      { type: 'text', value: 'paid #2' },
      { type: 'text', value: 'paid #2' },
    ]);
  });

  it('preliminary results (an async generator execute) run inside the record, once; the last value is the result', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: string[] = [];
    const tools = {
      send_payment: tool({
        inputSchema: z.object({ orderId: z.string() }),
        execute: idempotentTool(async function* sendPayment(input: { orderId: string }) {
          yield { status: 'authorizing' as const };
          charges.push(input.orderId);
          yield { status: 'paid' as const, receipt: `r-${charges.length}` };
        }, { store, scope: 'chat-1' }),
      }),
    };
    const model = fakeModel('send_payment', { orderId: 'o-1' }, UNIQUE_ID);
    const messages: ModelMessage[] = [{ role: 'user', content: 'pay' }];
    const a = await generateText({ model, tools, messages });
    const b = await generateText({ model, tools, messages }); // retried
    expect(charges).toEqual(['o-1']);
    expect(toolResults(a)).toEqual([expect.objectContaining({ output: { type: 'json', value: { status: 'paid', receipt: 'r-1' } } })]);
    expect(toolResults(b)).toEqual(toolResults(a));
  });

  it('a missing experimental_context reaches the developer as a warning, and the model as a tool error', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      let runs = 0;
      const tools = {
        send_payment: tool({
          inputSchema: z.object({ orderId: z.string() }),
          execute: idempotentTool(async function payWithContext() { return ++runs; }, {
            store,
            scope: (_input, o) => (o.experimental_context as { chatId?: string } | undefined)?.chatId,
          }),
        }),
      };
      const model = fakeModel('send_payment', { orderId: 'o-1' }, UNIQUE_ID);
      const r = await generateText({ model, tools, messages: [{ role: 'user', content: 'pay' }] });
      await generateText({ model, tools, messages: [{ role: 'user', content: 'pay' }] });
      expect(runs).toBe(0);
      expect(toolResults(r)).toEqual([expect.objectContaining({ output: { type: 'error-text', value: expect.stringMatching(/"scope" option returned undefined/) } })]);
      await new Promise<void>((resolve) => setImmediate(resolve));
      const ours = warnings.filter((w) => w.name === 'IdempotentToolsWarning');
      expect(ours).toHaveLength(1);
      expect(ours[0].message).toMatch(/"scope" option returned undefined.*experimental_context/s);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('an anonymous execute without a name is refused at wrap time; "context" is refused, "key" must be a function', () => {
    expect(() => idempotentTool(async () => 1, { scope: 'c' })).toThrow(/anonymous.*"name" option/s);
    expect(idempotentTool(async () => 1, { scope: 'c', name: 'send_payment' }).name).toBe('send_payment');
    expect(() => idempotentTool(async function k() { return 1; }, { scope: 'c', context: () => 'k' } as never)).toThrow(/"context" is not taken here.*"key"/s);
    expect(() => idempotentTool(async function k() { return 1; }, { scope: 'c', key: 'order-1' as never })).toThrow(/option "key" must be a function/);
    expect(() => idempotentTool(async function k() { return 1; }, { scope: 'c', onDuplicate: 'raise' } as never)).toThrow(/"raise" is refused/);
  });
});


describe('an aborted stream, retried, with a tool that forwards abortSignal', () => {
  // What the tool's HTTP client throws when the signal fires: the DOM's AbortError, or a
  // library's own error (recognised because the framework's signal had fired).
  const shapes: Array<[string, () => unknown]> = [
    ['an AbortError', () => new DOMException('This operation was aborted', 'AbortError')],
    ["a client's own error", () => new Error('request cancelled by the caller')],
  ];
  it.each(shapes)('charges once (%s): the abort leaves the outcome unknown, and reconcile finds the charge by currentKey()', async (_shape, abortError) => {
    const store = new SqliteStore({ path: tempDb() });
    // A payment provider: the charge is made when the request arrives; the answer comes later.
    const provider = {
      charges: [] as Array<{ ref: string; orderId: string; id: string }>,
      arrived: undefined as undefined | (() => void),
      answer: false,
      async charge(orderId: string, ref: string, signal: AbortSignal | undefined) {
        const charge = { ref, orderId, id: `ch-${this.charges.length + 1}` };
        this.charges.push(charge);
        this.arrived?.();
        if (!this.answer) {
          await new Promise((_, reject) => {
            const abort = () => reject(abortError());
            if (signal?.aborted) abort();
            else signal?.addEventListener('abort', abort);
          });
        }
        return charge.id;
      },
    };
    const reconciled: unknown[] = [];
    const tools = {
      send_payment: tool({
        inputSchema: z.object({ orderId: z.string() }),
        execute: idempotentTool(async function sendPayment(input: { orderId: string }, { abortSignal }) {
          return { charge: await provider.charge(input.orderId, currentKey()!, abortSignal as AbortSignal) };
        }, {
          store,
          scope: 'chat-1',
          leaseMs: 50, // how soon a call whose outcome is unknown is taken over and reconciled
          reconcile: async ({ key, input }) => {
            reconciled.push(input);
            const found = provider.charges.find((c) => c.ref === key);
            return found ? { happened: true, result: { charge: found.id } } : { happened: false };
          },
        }),
      }),
    };
    const model = fakeModel('send_payment', { orderId: 'o-1' }, UNIQUE_ID);
    const messages: ModelMessage[] = [{ role: 'user', content: 'pay' }];

    const controller = new AbortController();
    provider.arrived = () => controller.abort(); // the user presses stop after the request went out
    const first = streamText({ model, tools, messages, abortSignal: controller.signal });
    await first.consumeStream({ onError: () => {} });
    expect(provider.charges).toHaveLength(1);

    provider.arrived = undefined;
    provider.answer = true;
    const retry = await generateText({ model, tools, messages }); // the user retries
    expect(provider.charges).toHaveLength(1);
    expect(reconciled).toEqual([{ orderId: 'o-1' }]);
    expect(toolResults(retry)).toEqual([expect.objectContaining({ output: { type: 'json', value: { charge: 'ch-1' } } })]);
  });
});


describe('record metadata', () => {
  it('each claim carries the framework, the tool call id and the conversation as its scope', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const metas: unknown[] = [];
    // The real store, with its acquire requests noted on the way.
    const noting = {
      get: store.get.bind(store),
      acquire: (request: Parameters<typeof store.acquire>[0]) => (metas.push(request.meta), store.acquire(request)),
      complete: store.complete.bind(store),
      fail: store.fail.bind(store),
      renew: store.renew.bind(store),
      listRecords: store.listRecords.bind(store),
      clear: store.clear.bind(store),
      close: store.close.bind(store),
    };
    const tools = {
      send_payment: tool({
        inputSchema: z.object({ orderId: z.string() }),
        execute: idempotentTool(async function sendPayment() { return 'ok'; }, { store: noting, scope: 'chat-9' }),
      }),
    };
    await generateText({ model: fakeModel('send_payment', { orderId: 'o-1' }, UNIQUE_ID), tools, messages: [{ role: 'user', content: 'pay' }] });
    expect(metas).toEqual([expect.objectContaining({ framework: 'ai-sdk', toolCallId: UNIQUE_ID, scope: 'chat-9' })]);
  });
});

/** LeaseLostError (the protocol branch's core): a run whose claim was taken over while it ran. */

describe('a run whose claim was taken over while it ran', () => {
  it('gets the recorded outcome, not an error the model would answer by calling again', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: string[] = [];
    let arrived!: () => void;
    const firstArrived = new Promise<void>((r) => (arrived = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // Tools are built per request; the second request's tools claim a key in flight ('retry').
    const toolsFor = (onDuplicate: 'block' | 'retry') => ({
      send_payment: tool({
        inputSchema: z.object({ orderId: z.string() }),
        execute: idempotentTool(async function sendPayment(input: { orderId: string }) {
          charges.push(input.orderId);
          const n = charges.length;
          if (n === 1) {
            arrived();
            await gate; // the first run is paused past its claim
          }
          return { charge: `ch-${n}` };
        }, { store, scope: 'chat-1', onDuplicate }),
      }),
    });
    const model = fakeModel('send_payment', { orderId: 'o-1' }, UNIQUE_ID);
    const messages: ModelMessage[] = [{ role: 'user', content: 'pay' }];
    const first = generateText({ model, tools: toolsFor('block'), messages });
    await firstArrived;
    const second = await generateText({ model, tools: toolsFor('retry'), messages });
    release();
    const a = await first;
    expect(toolResults(second)).toEqual([expect.objectContaining({ output: { type: 'json', value: { charge: 'ch-2' } } })]);
    expect(toolResults(a)).toEqual(toolResults(second)); // the recorded outcome, not LeaseLostError
  });
});
