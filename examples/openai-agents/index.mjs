// OpenAI Agents JS: a tool that needs approval. The approved RunState is saved, and the
// worker that resumes it runs twice (a retried job); idempotentTool replays the first charge.
// Then the whole tools array at once (idempotentTools) with a business key: the payment
// provider is slower than the tool's timeoutMs, the model is told "timed out" and calls again
// under a new call id; the re-call joins the first run and gets its result.
//
//   node examples/openai-agents/index.mjs      (offline: a scripted Model, a temp SQLite file)
//
// Exits non-zero if the payment ran more than once.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Agent, RunState, Runner, Usage, setTracingDisabled, tool } from '@openai/agents-core';
import { SqliteStore } from 'idempotent-tools';
import { idempotentTool, idempotentTools } from 'idempotent-tools/openai-agents';
import { z } from 'zod';

setTracingDisabled(true);
const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-openai-agents-'));
const store = new SqliteStore({ path: join(dir, 'store.db') });
const charges = [];

// A Model that asks for the tool, then answers once the tool result is in. Like the Responses
// API it gives each output item an id (fc_...), which tells this call from a later one that
// reuses call_0; a Chat Completions model gives none: then wrap the agent's tools with
// idempotentTools (below), which tells turns apart by itself, or give the tool a business key.
const model = {
  async getResponse(request) {
    const done = Array.isArray(request.input) && request.input.some((i) => i.type === 'function_call_result');
    return {
      usage: new Usage(),
      output: done
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Paid.' }] }]
        : [{ type: 'function_call', id: 'fc_1', callId: 'call_0', name: 'send_payment', arguments: JSON.stringify({ orderId: 'o-42', cents: 1999 }), status: 'completed' }],
    };
  },
  async *getStreamedResponse() { throw new Error('not used'); },
};

const sendPayment = tool({
  name: 'send_payment',
  description: 'Charge an order',
  parameters: z.object({ orderId: z.string(), cents: z.number() }),
  needsApproval: true,
  execute: idempotentTool(
    async function sendPayment({ orderId, cents }) {
      charges.push({ orderId, cents });
      return { chargeId: `ch_${charges.length}` };
    },
    {
      store,
      // The run context is serialized with the RunState, so the scope survives resumes.
      scope: (input, runContext) => runContext.context.conversationId,
      onEvent: (e) => console.log(`  send_payment ${e.type} (call ${e.toolCallId}, conversation ${e.scope.conversation})`),
    },
  ),
});
const agent = new Agent({ name: 'payer', instructions: 'Pay orders.', model, tools: [sendPayment] });
const runner = new Runner();

const first = await runner.run(agent, 'Pay order o-42', { context: { conversationId: 'conv-42' } });
for (const item of first.interruptions) first.state.approve(item);
const saved = first.state.toString(); // e.g. written to a queue or a database

for (const attempt of [1, 2]) {
  console.log(`resume the saved RunState, attempt ${attempt}:`);
  const r = await runner.run(agent, await RunState.fromString(agent, saved));
  console.log(`  answer: ${r.finalOutput}`);
}

// The model calls send_payment; while it is told "timed out" it calls again, each time under a new call id.
let calls = 0;
const recallingModel = {
  async getResponse(request) {
    const results = Array.isArray(request.input) ? request.input.filter((i) => i.type === 'function_call_result') : [];
    const timedOut = results.length === 0 || (results.length < 20 && /timed out/.test(JSON.stringify(results.at(-1).output)));
    return {
      usage: new Usage(),
      output: timedOut
        ? [{ type: 'function_call', callId: `call_${++calls}`, name: 'pay_invoice', arguments: JSON.stringify({ invoiceId: 'inv-7', cents: 500 }), status: 'completed' }]
        : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `Paid: ${results.at(-1).output.text ?? JSON.stringify(results.at(-1).output)}` }] }],
    };
  },
  async *getStreamedResponse() { throw new Error('not used'); },
};
let finish;
const slowProvider = new Promise((resolve) => (finish = resolve));
const invoicePayments = [];
const payInvoice = tool({
  name: 'pay_invoice',
  description: 'Pay an invoice',
  parameters: z.object({ invoiceId: z.string(), cents: z.number() }),
  timeoutMs: 50,
  execute: async ({ invoiceId, cents }) => {
    await slowProvider; // slower than timeoutMs
    invoicePayments.push({ invoiceId, cents });
    return { paymentId: `pay_${invoicePayments.length}` };
  },
});
const tools = idempotentTools([payInvoice], {
  store,
  scope: (input, runContext) => runContext.context.conversationId,
  tools: { pay_invoice: { key: (input) => `invoice-${input.invoiceId}` } }, // the business key
  onEvent: (e) => {
    console.log(`  pay_invoice ${e.type} (call ${e.toolCallId})`);
    if (e.type === 'in-flight') finish(); // a re-call is waiting on the first run: let the provider answer
  },
});
console.log('a slow payment, timeoutMs, the model calls again:');
const paid = await runner.run(new Agent({ name: 'biller', model: recallingModel, tools }), 'Pay invoice inv-7', { context: { conversationId: 'conv-43' }, maxTurns: 30 });
console.log(`  answer: ${paid.finalOutput}`);
console.log(`invoice payments: ${invoicePayments.length}`);

store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`charges: ${charges.length}`);
if (invoicePayments.length !== 1) {
  console.error('FAIL: the invoice was paid more than once');
  process.exit(1);
}
if (charges.length !== 1) {
  console.error('FAIL: the payment ran more than once');
  process.exit(1);
}
