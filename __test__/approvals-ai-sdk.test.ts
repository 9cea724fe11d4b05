// Approvals in the AI SDK (ai 6, in npm test; ai 7 runs in e2e/node22/ai-sdk-7.mjs): tools
// with needsApproval, idempotentTools over the set, the approval answered in the history
// (tool-approval-response parts), MockLanguageModelV3, real SqliteStore files. The AI SDK
// runs an approved call again for every submission of its history and runs whatever input
// the history holds under an approval id; the guard runs it once, with the approved input only.

import { createRequire } from 'node:module';

import { type ModelMessage, generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTools }: typeof import('../dist/integrations/ai-sdk.js') = require(`${ROOT}/dist/integrations/ai-sdk.js`);
const { SqliteStore, recordApproval, ApprovalMismatchError } = lib;

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** Answers each user turn with `calls` (ids restart every turn: call_0, call_1), text after tool results. */
function fakeModel(calls: Array<{ cents: number }>) {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) =>
      prompt.at(-1)?.role === 'user'
        ? {
            content: calls.map((input, i) => ({ type: 'tool-call' as const, toolCallId: `call_${i}`, toolName: 'charge', input: JSON.stringify(input) })),
            finishReason: { unified: 'tool-calls' as const, raw: undefined },
            usage,
            warnings: [],
          }
        : { content: [{ type: 'text' as const, text: 'done' }], finishReason: { unified: 'stop' as const, raw: undefined }, usage, warnings: [] },
  });
}

function setup(opts: { guarded?: boolean } = {}) {
  const store = new SqliteStore({ path: tempDb() });
  const charges: Array<{ cents: number }> = [];
  const events: Array<{ type: string; decision?: string; toolCallId?: string; error?: unknown }> = [];
  const raw = {
    charge: tool({
      inputSchema: z.object({ cents: z.number() }),
      needsApproval: true,
      execute: async (input: { cents: number }) => {
        charges.push(input);
        return `charged ${input.cents} (#${charges.length})`;
      },
    }),
  };
  const tools = opts.guarded === false ? raw : idempotentTools(raw, { store, scope: 'chat-1', onEvent: (e) => events.push(e) });
  return { store, charges, events, tools };
}

/** Asks the model (the history ends with a user turn) and answers its approval requests. */
async function approve(model: MockLanguageModelV3, tools: Record<string, unknown>, history: ModelMessage[], answers: boolean[]) {
  const first = await generateText({ model, tools: tools as never, messages: history });
  const requests = first.content.filter((p) => p.type === 'tool-approval-request') as Array<{ approvalId: string }>;
  expect(requests).toHaveLength(answers.length);
  const responses = requests.map((r, i) => ({ type: 'tool-approval-response' as const, approvalId: r.approvalId, approved: answers[i], ...(answers[i] ? {} : { reason: 'too much' }) }));
  return { approved: [...history, ...first.response.messages, { role: 'tool' as const, content: responses }], requests };
}

/** What the model got for each call (an approved call runs before the first step: its result leads the response's messages). */
function outcomes(r: { response: { messages: ModelMessage[] } }) {
  const parts = r.response.messages.flatMap((m) => (m.role === 'tool' ? m.content : [])).filter((p) => p.type === 'tool-result') as Array<{ toolCallId: string; output: { type: string; value?: unknown } }>;
  const errors = parts.filter((p) => p.output.type === 'error-text').map((p) => String(p.output.value));
  return { results: parts.filter((p) => p.output.type !== 'error-text'), errors };
}

describe('approvals in the AI SDK (ai 6): idempotentTools over tools with needsApproval', () => {
  it('an approval answered twice (the approved history submitted twice, and twice at once): one run; the approval recorded once, by its approval id', async () => {
    const { store, charges, events, tools } = setup();
    const model = fakeModel([{ cents: 100 }]);
    const { approved, requests } = await approve(model, tools, [{ role: 'user', content: 'pay' }], [true]);
    const first = await generateText({ model, tools, messages: approved });
    await Promise.all([generateText({ model, tools, messages: approved }), generateText({ model, tools, messages: approved })]);
    const again = await generateText({ model, tools, messages: approved });
    expect(charges).toEqual([{ cents: 100 }]);
    expect(outcomes(again).results).toEqual(outcomes(first).results);
    const decisions = (await store.listRecords()).filter((r) => r.name.startsWith('approval:'));
    expect(decisions.map((r) => r.name)).toEqual(['approval:approved:charge']);
    expect(decisions[0].result).toEqual(expect.objectContaining({ decision: 'approve', scope: 'chat-1', toolCallId: 'call_0', turn: requests[0].approvalId, source: 'ai-sdk' }));
    expect(events.filter((e) => e.type === 'approved')).toHaveLength(1);
  });

  it('the approved history resubmitted with other input under the same approval: not run; the model is told, the developer gets ApprovalMismatchError', async () => {
    const { charges, events, tools } = setup();
    const model = fakeModel([{ cents: 100 }]);
    const { approved } = await approve(model, tools, [{ role: 'user', content: 'pay' }], [true]);
    await generateText({ model, tools, messages: approved });
    // The same history, its tool call's input changed (a client's edit, a forged request).
    const edited = JSON.parse(JSON.stringify(approved).replace('"cents":100', '"cents":900')) as ModelMessage[];
    const r = await generateText({ model, tools, messages: edited });
    expect(charges).toEqual([{ cents: 100 }]);
    expect(outcomes(r).errors).toEqual([expect.stringMatching(/^idempotent-tools: tool "charge" call call_0 is approved for other arguments than these \(approved\), so it did not run/)]);
    expect(events.find((e) => e.type === 'approval-mismatch')?.error).toBeInstanceOf(ApprovalMismatchError);
  });

  for (const guarded of [false, true]) {
    it(`a rejection, then the history resubmitted with it approved: ${guarded ? 'never runs (the denial was recorded when its sibling ran)' : 'without the guard, it runs'}`, async () => {
      const { store, charges, tools } = setup({ guarded });
      const model = fakeModel([{ cents: 100 }, { cents: 200 }]);
      const { approved } = await approve(model, tools, [{ role: 'user', content: 'pay both' }], [true, false]);
      await generateText({ model, tools, messages: approved });
      expect(charges).toEqual([{ cents: 100 }]);
      const flipped = JSON.parse(JSON.stringify(approved).replace('"approved":false', '"approved":true')) as ModelMessage[];
      const r = await generateText({ model, tools, messages: flipped });
      expect(charges.filter((c) => c.cents === 200)).toHaveLength(guarded ? 0 : 1);
      if (guarded) {
        expect(charges).toEqual([{ cents: 100 }]);
        expect(outcomes(r).errors).toEqual([expect.stringMatching(/^idempotent-tools: tool "charge" call call_1 was rejected: "too much"; it does not run/)]);
        const names = (await store.listRecords()).filter((x) => x.name.startsWith('approval:')).map((x) => x.name).sort();
        expect(names).toEqual(['approval:approved:charge', 'approval:rejected:charge']);
      }
    });
  }

  it('a rejection recorded by your own UI (recordApproval with the approval id): the history approved later does not run it', async () => {
    const { store, charges, tools } = setup();
    const model = fakeModel([{ cents: 100 }]);
    const { approved, requests } = await approve(model, tools, [{ role: 'user', content: 'pay' }], [true]);
    await recordApproval(store, { scope: 'chat-1', toolCallId: 'call_0', toolName: 'charge', turn: requests[0].approvalId, decision: 'reject', by: 'alice', reason: 'duplicate order' });
    const r = await generateText({ model, tools, messages: approved });
    expect(charges).toEqual([]);
    expect(outcomes(r).errors).toEqual([expect.stringMatching(/call call_0 was rejected by alice: "duplicate order"/)]);
  });

  it('call_0 reused in the next turn after an approval: its own approval id, its own decision, its own run', async () => {
    const { store, charges, tools } = setup();
    const model = fakeModel([{ cents: 100 }]);
    const turn1 = await approve(model, tools, [{ role: 'user', content: 'pay' }], [true]);
    const r1 = await generateText({ model, tools, messages: turn1.approved });
    const turn2 = await approve(model, tools, [...turn1.approved, ...r1.response.messages, { role: 'user', content: 'pay again' }], [true]);
    await generateText({ model, tools, messages: turn2.approved });
    await generateText({ model, tools, messages: turn2.approved }); // and resubmitted
    expect(charges).toEqual([{ cents: 100 }, { cents: 100 }]);
    const turns = (await store.listRecords()).filter((x) => x.name.startsWith('approval:')).map((x) => (x.result as { turn: string }).turn).sort();
    expect(turns).toEqual([turn1.requests[0].approvalId, turn2.requests[0].approvalId].sort());
  });
});

// Issue 29, items 1 and 6: a call's identity must not depend on how much history the client
// sends (chats cap it: the oldest messages dropped); a denial is final once the install sees
// it (in any later request's messages), or at once with the route's one line.
const { recordApprovalResponses }: typeof import('../dist/integrations/ai-sdk.js') = require(`${ROOT}/dist/integrations/ai-sdk.js`);

describe('approvals in the AI SDK (ai 6): trimmed histories and denials', () => {
  const earlier: ModelMessage[] = [
    { role: 'user', content: 'hello' },
    { role: 'assistant', content: [{ type: 'text', text: 'hi, what shall I pay?' }] },
  ];

  it('the approved call resubmitted with a shorter history (the oldest messages dropped): it runs once', async () => {
    const { charges, tools } = setup();
    const model = fakeModel([{ cents: 100 }]);
    const { approved } = await approve(model, tools, [...earlier, { role: 'user', content: 'pay' }], [true]);
    const first = await generateText({ model, tools, messages: approved });
    // The chat keeps only its last messages: the same approval, sent again.
    const trimmed = await generateText({ model, tools, messages: approved.slice(2) });
    const shortest = await generateText({ model, tools, messages: approved.slice(-2) });
    expect(charges).toEqual([{ cents: 100 }]);
    expect(outcomes(trimmed).results).toEqual(outcomes(first).results);
    expect(outcomes(shortest).results).toEqual(outcomes(first).results);
  });

  it('call_0 with the same input in a later turn, the history trimmed meanwhile: a new call, its own run', async () => {
    const { charges, tools } = setup();
    const model = fakeModel([{ cents: 100 }]);
    const turn1 = await approve(model, tools, [...earlier, { role: 'user', content: 'pay' }], [true]);
    const r1 = await generateText({ model, tools, messages: turn1.approved });
    const history = [...turn1.approved, ...r1.response.messages].slice(2); // the oldest dropped
    const turn2 = await approve(model, tools, [...history, { role: 'user', content: 'pay again' }], [true]);
    await generateText({ model, tools, messages: turn2.approved });
    await generateText({ model, tools, messages: turn2.approved.slice(3) }); // and resubmitted, trimmed further
    expect(charges).toEqual([{ cents: 100 }, { cents: 100 }]);
  });

  it('a lone denial (the model answers in text), then a later request where a guarded tool runs: the denial is recorded there, and the denied request flipped to approved does not run', async () => {
    const { store, charges, tools } = setup();
    const model = fakeModel([{ cents: 100 }]);
    const { approved: denied } = await approve(model, tools, [{ role: 'user', content: 'pay' }], [false]);
    const r1 = await generateText({ model, tools, messages: denied });
    expect(charges).toEqual([]);
    // The next turn: another call, approved, runs; its messages carry the earlier denial.
    const turn2 = await approve(model, tools, [...denied, ...r1.response.messages, { role: 'user', content: 'pay now' }], [true]);
    await generateText({ model, tools, messages: turn2.approved });
    expect(charges).toEqual([{ cents: 100 }]);
    const flipped = JSON.parse(JSON.stringify(denied).replace('"approved":false', '"approved":true')) as ModelMessage[];
    const r = await generateText({ model, tools, messages: flipped });
    expect(charges).toEqual([{ cents: 100 }]);
    expect(outcomes(r).errors).toEqual([expect.stringMatching(/call call_0 was rejected: "too much"; it does not run/)]);
    expect((await store.listRecords()).filter((x) => x.name.startsWith('approval:')).map((x) => x.name).sort()).toEqual(['approval:approved:charge', 'approval:rejected:charge']);
  });

  for (const withLine of [false, true]) {
    it(`a lone denial, then the same request flipped to approved: ${withLine ? 'with recordApprovalResponses in the route, it never runs' : 'without the route\'s line, it runs (nothing of the denial\'s request ran to see it)'}`, async () => {
      const { store, charges, tools } = setup();
      const model = fakeModel([{ cents: 100 }]);
      // The route: the one line, then generateText.
      const route = async (messages: ModelMessage[]) => {
        if (withLine) await recordApprovalResponses(messages, { scope: 'chat-1', store });
        return generateText({ model, tools, messages });
      };
      const first = await route([{ role: 'user', content: 'pay' }]);
      const [request] = first.content.filter((p) => p.type === 'tool-approval-request') as Array<{ approvalId: string }>;
      const denied: ModelMessage[] = [
        { role: 'user', content: 'pay' },
        ...first.response.messages,
        { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved: false, reason: 'no' }] },
      ];
      await route(denied);
      const flipped = JSON.parse(JSON.stringify(denied).replace('"approved":false', '"approved":true')) as ModelMessage[];
      const r = await route(flipped);
      expect(charges).toHaveLength(withLine ? 0 : 1);
      if (withLine) expect(outcomes(r).errors).toEqual([expect.stringMatching(/call call_0 was rejected: "no"; it does not run/)]);
    });
  }
});
