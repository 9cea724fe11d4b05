// ai 7 end to end (Node >= 22 project): a tool that needs approval; the same approved history
// is submitted twice. ai 7 runs an approved tool again for every submission (the plain tool is
// the control: two charges); idempotentTool must charge once. ai 7 hands the tool its context
// as `options.context` (from generateText's `toolsContext`), where ai 5/6 had
// `experimental_context`. Offline: MockLanguageModelV3 and a temp SQLite store.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { SqliteStore } from 'idempotent-tools';
import { idempotentTool, idempotentTools } from 'idempotent-tools/ai-sdk';
import { z } from 'zod';

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = () => new MockLanguageModelV3({
  doGenerate: async ({ prompt }) =>
    prompt.at(-1).role === 'user'
      ? { content: [{ type: 'tool-call', toolCallId: 'call_0', toolName: 'sendPayment', input: JSON.stringify({ orderId: 'o-42', cents: 1999 }) }],
          finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] }
      : { content: [{ type: 'text', text: 'Paid.' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] },
});

async function scenario(wrap) {
  const charges = [];
  const errors = [];
  const store = new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'e2e-ai7-')), 'store.db') });
  async function sendPayment({ orderId, cents }) {
    charges.push({ orderId, cents });
    return { chargeId: `ch_${charges.length}` };
  }
  const execute = wrap ? idempotentTool(sendPayment, { store, scope: (input, { context }) => context.chatId }) : sendPayment;
  const tools = {
    sendPayment: tool({ description: 'Charge an order', inputSchema: z.object({ orderId: z.string(), cents: z.number() }), needsApproval: true, execute }),
  };
  const toolsContext = { sendPayment: { chatId: 'chat-42' } };
  const messages = [{ role: 'user', content: 'Pay order o-42' }];
  const m = model();
  const first = await generateText({ model: m, tools, messages, toolsContext });
  const approvals = first.content
    .filter((p) => p.type === 'tool-approval-request')
    .map((p) => ({ type: 'tool-approval-response', approvalId: p.approvalId, approved: true }));
  if (approvals.length !== 1) throw new Error('no approval was asked for');
  const approved = [...messages, ...first.response.messages, { role: 'tool', content: approvals }];
  for (let i = 0; i < 2; i++) {
    const r = await generateText({ model: m, tools, messages: approved, toolsContext });
    for (const step of r.steps) for (const part of step.content) if (part.type === 'tool-error') errors.push(String(part.error));
  }
  await store.close();
  return { charges: charges.length, errors };
}

let failed = false;
for (const [wrap, want] of [[false, 2], [true, 1]]) {
  const { charges, errors } = await scenario(wrap);
  const ok = charges === want && errors.length === 0;
  failed ||= !ok;
  console.log(`${ok ? 'ok  ' : 'FAIL'} approved history submitted twice, ${wrap ? 'idempotentTool' : 'plain tool'}: ${charges} charge(s) (want ${want})`);
  for (const e of errors) console.log(`     tool error: ${e.slice(0, 200)}`);
}
// The README's ai 7 install: idempotentTools over the whole set, the scope from each tool's own
// context (toolsContext), a business key on the charge. The model calls sendPayment, then calls
// it again under a new id (a re-plan); then the approved history is submitted twice.
async function toolSet(wrap) {
  const charges = [];
  const store = new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'e2e-ai7-')), 'store.db') });
  const raw = {
    sendPayment: tool({
      description: 'Charge an order',
      inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
      execute: async ({ orderId, cents }) => {
        charges.push({ orderId, cents });
        return { chargeId: `ch_${charges.length}` };
      },
    }),
    lookup: tool({ description: 'Look an order up', inputSchema: z.object({ orderId: z.string() }), execute: async ({ orderId }) => ({ orderId, status: 'open' }) }),
  };
  const tools = wrap
    ? idempotentTools(raw, {
        store,
        scope: (input, { context }) => context.chatId,
        readOnly: ['lookup'],
        tools: { sendPayment: { key: (input) => `order-${input.orderId}` } },
      })
    : raw;
  const m = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const n = prompt.filter((p) => p.role === 'tool').length;
      return n < 2
        ? { content: [{ type: 'tool-call', toolCallId: `call_${n}`, toolName: 'sendPayment', input: JSON.stringify({ orderId: 'o-42', cents: 1999 }) }],
            finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] }
        : { content: [{ type: 'text', text: 'Paid.' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
    },
  });
  const toolsContext = { sendPayment: { chatId: 'chat-7' }, lookup: { chatId: 'chat-7' } };
  const r = await generateText({ model: m, tools, messages: [{ role: 'user', content: 'Pay order o-42' }], toolsContext, stopWhen: () => false });
  const outputs = r.steps.flatMap((s) => s.content).filter((p) => p.type === 'tool-result' || p.type === 'tool-error').map((p) => JSON.stringify(p.output ?? String(p.error)));
  await store.close();
  return { charges: charges.length, outputs };
}
for (const [wrap, want] of [[false, 2], [true, 1]]) {
  const { charges, outputs } = await toolSet(wrap);
  const ok = charges === want && (!wrap || (outputs.length === 2 && outputs[0] === outputs[1]));
  failed ||= !ok;
  console.log(`${ok ? 'ok  ' : 'FAIL'} the model calls again under a new id, ${wrap ? 'idempotentTools with a business key' : 'plain tools'}: ${charges} charge(s) (want ${want})`);
  if (wrap) console.log(`     tool results: ${outputs.join(' ')}`);
}

// The approved history submitted twice, through idempotentTools (no business key: the tool call id).
{
  const charges = [];
  const store = new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'e2e-ai7-')), 'store.db') });
  const tools = idempotentTools({
    sendPayment: tool({ description: 'Charge an order', inputSchema: z.object({ orderId: z.string(), cents: z.number() }), needsApproval: true,
      execute: async (input) => { charges.push(input); return { chargeId: `ch_${charges.length}` }; } }),
  }, { store, scope: (input, { context }) => context.chatId });
  const toolsContext = { sendPayment: { chatId: 'chat-8' } };
  const messages = [{ role: 'user', content: 'Pay order o-42' }];
  const m = model();
  const first = await generateText({ model: m, tools, messages, toolsContext });
  const approvals = first.content.filter((p) => p.type === 'tool-approval-request').map((p) => ({ type: 'tool-approval-response', approvalId: p.approvalId, approved: true }));
  const approved = [...messages, ...first.response.messages, { role: 'tool', content: approvals }];
  for (let i = 0; i < 2; i++) await generateText({ model: m, tools, messages: approved, toolsContext });
  await store.close();
  const ok = approvals.length === 1 && charges.length === 1;
  failed ||= !ok;
  console.log(`${ok ? 'ok  ' : 'FAIL'} approved history submitted twice, idempotentTools: ${charges.length} charge(s) (want 1)`);
}
console.log(failed ? 'ai 7 e2e: FAILED' : 'ai 7 e2e: ok');
process.exit(failed ? 1 : 0);
