// Mastra 1.x end to end (Node >= 22.13), a real Agent with a scripted LanguageModelV2 (offline)
// and a temp SQLite store. Two flows, each run with the plain tool (the control: what Mastra
// does) and with idempotentTool (which must charge once):
//  - approval: requireApproval stops the run; the approval is sent, then sent again (a retried
//    request); Mastra runs the tool after the first and refuses the second;
//  - interrupt and resume: the tool charges, then suspends; resumeStream runs it again from its
//    first line, so the plain tool charges twice; wrapped, the charge is a step() and replays.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { createTool } from '@mastra/core/tools';
import { SqliteStore, step } from 'idempotent-tools';
import { idempotentTool, idempotentTools } from 'idempotent-tools/mastra';
import { z } from 'zod';

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };

/** A model that calls sendPayment once, then answers in text once it has a tool result. */
function scriptedModel() {
  const respond = (prompt) => {
    const hasResult = prompt.some((m) => m.role === 'tool');
    return hasResult
      ? [
          { type: 'stream-start', warnings: [] },
          { type: 'text-start', id: 't1' },
          { type: 'text-delta', id: 't1', delta: 'Paid.' },
          { type: 'text-end', id: 't1' },
          { type: 'finish', finishReason: 'stop', usage },
        ]
      : [
          { type: 'stream-start', warnings: [] },
          { type: 'tool-call', toolCallId: 'call_pay_1', toolName: 'sendPayment', input: JSON.stringify({ orderId: 'o-42', cents: 1999 }) },
          { type: 'finish', finishReason: 'tool-calls', usage },
        ];
  };
  return {
    specificationVersion: 'v2',
    provider: 'scripted',
    modelId: 'scripted-payer',
    supportedUrls: {},
    async doGenerate() {
      throw new Error('this test streams');
    },
    async doStream({ prompt }) {
      const parts = respond(prompt);
      return { stream: new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }) };
    },
  };
}

async function drain(output) {
  const types = [];
  for await (const chunk of output.fullStream) types.push(chunk.type);
  return types;
}

function setup(wrap, execute, extra = {}) {
  const store = new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'e2e-mastra-')), 'store.db') });
  const tool = createTool({
    id: 'send-payment',
    description: 'Charge an order',
    inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
    ...extra,
    execute: wrap ? idempotentTool(execute, { store, scope: 'conversation-42' }) : execute,
  });
  const agent = new Agent({ id: 'payer', name: 'payer', instructions: 'Pay orders.', model: scriptedModel(), tools: { sendPayment: tool } });
  new Mastra({ agents: { payer: agent }, logger: false });
  return { agent, store };
}

async function approval(wrap) {
  const charges = [];
  const { agent, store } = setup(wrap, async function sendPayment({ orderId, cents }) {
    charges.push({ orderId, cents });
    return { chargeId: `ch_${charges.length}` };
  }, { requireApproval: true });
  const first = await agent.stream('Pay order o-42');
  const firstTypes = await drain(first);
  if (!firstTypes.includes('tool-call-approval')) throw new Error(`no approval was asked for: ${firstTypes.join(', ')}`);
  if (charges.length !== 0) throw new Error('the tool ran before approval');
  const approvals = [];
  for (let i = 0; i < 2; i++) {
    try {
      approvals.push((await drain(await agent.approveToolCall({ runId: first.runId }))).join(' '));
    } catch (error) {
      approvals.push(`refused: ${String(error.message).split('\n')[0]}`);
    }
  }
  await store.close();
  return { charges: charges.length, approvals };
}

async function interruptResume(wrap) {
  const charges = [];
  const { agent, store } = setup(wrap, async function sendPayment({ orderId, cents }, context) {
    // Wrapped, the charge is a step (the documented pattern: Mastra re-runs a resumed tool
    // from its first line, and the helper does not record a suspended run as completed).
    const charge = () => charges.push({ orderId, cents });
    if (wrap) await step('charge', charge);
    else charge();
    if (!context.agent?.resumeData) return context.agent.suspend({ ask: 'confirm the receipt email' });
    return { chargeId: `ch_${charges.length}`, confirmed: context.agent.resumeData.ok };
  }, { suspendSchema: z.object({ ask: z.string() }), resumeSchema: z.object({ ok: z.boolean() }) });
  const first = await agent.stream('Pay order o-42');
  const firstTypes = await drain(first);
  if (!firstTypes.includes('tool-call-suspended')) throw new Error(`the tool did not suspend: ${firstTypes.join(', ')}`);
  const resumed = (await drain(await agent.resumeStream({ ok: true }, { runId: first.runId }))).join(' ');
  await store.close();
  return { charges: charges.length, resumed };
}

/** A model that calls sendPayment, then (a re-plan) calls it again under a new id with the same input, then answers. */
function recallingModel() {
  const respond = (prompt) => {
    const results = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content).filter((p) => p.type === 'tool-result').length;
    if (results >= 2) {
      return [
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 't1' },
        { type: 'text-delta', id: 't1', delta: 'Paid.' },
        { type: 'text-end', id: 't1' },
        { type: 'finish', finishReason: 'stop', usage },
      ];
    }
    return [
      { type: 'stream-start', warnings: [] },
      { type: 'tool-call', toolCallId: `call_pay_${results + 1}`, toolName: 'sendPayment', input: JSON.stringify({ orderId: 'o-42', cents: 1999 }) },
      { type: 'finish', finishReason: 'tool-calls', usage },
    ];
  };
  return { ...scriptedModel(), async doStream({ prompt }) {
    const parts = respond(prompt);
    return { stream: new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }) };
  } };
}

/** The README's Mastra install: idempotentTools over the agent's tools, a business key on the charge. */
async function businessKey(wrap) {
  const charges = [];
  const store = new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'e2e-mastra-')), 'store.db') });
  const raw = {
    sendPayment: createTool({
      id: 'send-payment',
      description: 'Charge an order',
      inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
      execute: async ({ orderId, cents }) => {
        charges.push({ orderId, cents });
        return { chargeId: `ch_${charges.length}` };
      },
    }),
  };
  const tools = wrap
    ? idempotentTools(raw, { store, scope: 'conversation-42', tools: { sendPayment: { key: (input) => `order-${input.orderId}` } } })
    : raw;
  const agent = new Agent({ id: 'payer2', name: 'payer2', instructions: 'Pay orders.', model: recallingModel(), tools });
  new Mastra({ agents: { payer2: agent }, logger: false });
  const out = await agent.stream('Pay order o-42', { maxSteps: 5 });
  const results = [];
  for await (const chunk of out.fullStream) if (chunk.type === 'tool-result') results.push(JSON.stringify(chunk.payload?.result ?? chunk.result));
  await store.close();
  return { charges: charges.length, results };
}

let failed = false;
function expectCharges(what, got, want) {
  const ok = got === want;
  failed ||= !ok;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}: ${got} charge(s) (want ${want})`);
}

const plainApproval = await approval(false);
expectCharges('approval sent twice, plain tool', plainApproval.charges, 1);
const wrappedApproval = await approval(true);
expectCharges('approval sent twice, idempotentTool', wrappedApproval.charges, 1);
for (const [i, a] of wrappedApproval.approvals.entries()) console.log(`     approval ${i + 1}: ${a.slice(0, 150)}`);

const plainResume = await interruptResume(false);
expectCharges('suspend then resume, plain tool (Mastra re-runs it from the top)', plainResume.charges, 2);
const wrappedResume = await interruptResume(true);
expectCharges('suspend then resume, idempotentTool', wrappedResume.charges, 1);
console.log(`     resumed stream: ${wrappedResume.resumed}`);
if (!wrappedResume.resumed.includes('tool-result')) {
  console.log('     note: the resumed run got no tool-result: the replay returned what the first run returned (its suspend)');
}
const plainKey = await businessKey(false);
expectCharges('the model calls again under a new id, plain tools', plainKey.charges, 2);
const keyed = await businessKey(true);
expectCharges('the model calls again under a new id, idempotentTools with a business key', keyed.charges, 1);
console.log(`     tool results: ${keyed.results.join(' ')}`);
if (keyed.results.length !== 2 || keyed.results[0] !== keyed.results[1]) {
  failed = true;
  console.log('FAIL the re-call did not get the first call\'s result');
}
console.log(failed ? 'mastra e2e: FAILED' : 'mastra e2e: ok');
process.exit(failed ? 1 : 0)
