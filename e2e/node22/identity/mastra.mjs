// The identity harness's driver for Mastra (@mastra/core 1.x, Node >= 22: e2e/node22): a real
// Agent whose tools idempotent-tools/mastra wraps, driven by a scripted AI SDK v2 model
// (doStream), on Mastra's own in-memory storage, one run per request.
//
//   thread        idempotentTools, memory threads (Mastra's MockMemory: its MastraMemory over
//                 InMemoryStore): a conversation is a thread, its caller the resource, and the
//                 helper's default scope. Trims cap what memory recalls (lastMessages).
//                 Approvals: requireApproval (true for the asks that wait for one), answered
//                 with approveToolCall / declineToolCall (recordApproval beside the decline, as
//                 docs/approvals.md says).
//   scope         idempotentTools, no memory, the `scope` option from the request context (the
//                 conversation id); the app sends each new message alone. Approvals as above.
//   business-key  idempotentTools, memory threads, and a business key: each conversation names
//                 its own orders.
//   suspend       idempotentTool inside createTool, no memory, the `scope` option: the tool
//                 suspends (context.agent.suspend) for the user's confirmation before it pays,
//                 and resumeStream answers: confirmed, confirmed with other cents (an edit), or
//                 declined (the tool returns without paying).
//
// Each ask streams one run whose model steps emit the scenario's calls; its runId is the app's
// request id, so that a retried request is the same run (without one, Mastra mints a run id for
// every request, and the helper, whose turn is the run, takes a retry's calls for new ones). A
// resend streams the same request again under the same runId and answers its approvals or
// suspensions as before (a flipped rejection: approved). An answer is sometimes sent twice at
// once (a double click, two workers: mastra#24590).
//
// Call ids: unique, or numbered: call_0, call_1, ... through a run's steps, from call_0 again in
// every run, or on memory threads in every thread. Mastra 1.71 cannot hold the rest:
// - its MessageList keeps one tool call per id in a run, so a provider that restarts at call_0
//   in every step never shows the model its later step's call (the model asks again, forever);
// - with memory, a call whose id an earlier run of the thread used (call_0 again in the next
//   request) runs, but the stream's tool-result and the model get the thread's first result
//   under that id, not this call's (the tool returned the new receipt; Mastra hands back the old).
// `--control id|args` wraps the payment with controls.js instead of the helper.
//
//   eval "$(.ci/nodes.sh)"   # from the repository's root, e2e/node22 installed
//   PATH="$NODE22_BIN:$PATH" node stress/identity/campaign.mjs --driver e2e/node22/identity/mastra.mjs --seed 7

import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { MockMemory } from '@mastra/core/memory';
import { RequestContext } from '@mastra/core/request-context';
import { InMemoryStore } from '@mastra/core/storage';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';

const require = createRequire(import.meta.url);
const { receiptsIn } = require('../../../stress/identity/ledger.js');
const { controlled } = require('../../../stress/identity/controls.js');
const { createRandom } = require('../../../stress/faults/proxy.js');
// The package as e2e/node22 resolves it (a link to the repository), or IDENTITY_PACKAGE_ROOT.
const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || join(require.resolve('idempotent-tools/package.json'), '..');
const pkg = require(PACKAGE);
const helper = require(join(PACKAGE, 'dist', 'integrations', 'mastra.js'));

export const name = 'mastra';
export const variants = [
  { name: 'thread', capabilities: { kind: 'conversation', callers: 2, multiStep: true, parallel: true, trim: true, approvals: ['approve', 'reject'] } },
  { name: 'scope', capabilities: { kind: 'conversation', callers: 2, multiStep: true, parallel: true, approvals: ['approve', 'reject'] } },
  { name: 'business-key', capabilities: { kind: 'conversation', callers: 2, multiStep: true, trim: true, malformed: true } },
  { name: 'suspend', capabilities: { kind: 'conversation', callers: 2, multiStep: true, parallel: true, approvals: ['approve', 'edit', 'reject'] } },
];

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };
const TOOL = 'pay';

/** A model answer as a v2 stream. */
function streamOf(parts) {
  return { stream: new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }) };
}

export async function run(scenario, { ledger, control, variant, dir }) {
  const store = new pkg.SqliteStore({ path: join(dir, 'store.db') });
  const memoryThreads = variant.name === 'thread' || variant.name === 'business-key';
  const businessKey = variant.name === 'business-key';
  const suspending = variant.name === 'suspend';
  const rand = createRandom(scenario.seed ^ 0x3a57);

  // What the model says in the run under way: the steps of the request being delivered. Its
  // step is the first whose calls are not all in the prompt since the last user message. (The
  // ledger needs no step: call ids never repeat within a Mastra run, see above.)
  let script = [];
  const model = {
    specificationVersion: 'v2',
    provider: 'scripted',
    modelId: 'scripted-payer',
    supportedUrls: {},
    async doGenerate() {
      throw new Error('the identity driver streams');
    },
    async doStream({ prompt }) {
      let lastUser = -1;
      prompt.forEach((m, i) => m.role === 'user' && (lastUser = i));
      const made = new Set(prompt.slice(lastUser + 1).flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((p) => p.type === 'tool-call').map((p) => p.toolCallId));
      let step = 0;
      while (step < script.length && script[step].every((c) => made.has(c.id))) step++;
      const calls = script[step];
      if (calls === undefined) {
        return streamOf([
          { type: 'stream-start', warnings: [] },
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'done' },
          { type: 'text-end', id: 't' },
          { type: 'finish', finishReason: 'stop', usage },
        ]);
      }
      return streamOf([
        { type: 'stream-start', warnings: [] },
        ...calls.map((c) => ({ type: 'tool-call', toolCallId: c.id, toolName: TOOL, input: JSON.stringify(c.args) })),
        { type: 'finish', finishReason: 'tool-calls', usage },
      ]);
    },
  };

  // The side effect: a payment, with its receipt in what the model gets.
  const pay = async (input, toolCallId) => ({ id: ledger.record({ toolCallId, args: input }), status: 'paid' });
  const guardedPay = control === undefined ? pay : controlled(control, pay, { idempotent: pkg.idempotent, store, name: TOOL });
  const execute = async (input, context) => {
    const toolCallId = context?.agent?.toolCallId;
    if (!suspending) return guardedPay(input, toolCallId);
    // Ask the user before paying: suspend, and on resume (the tool runs again from its first line) act on the answer.
    const resumeData = context.agent.resumeData;
    if (context.requestContext.get('confirm') === true && resumeData == null) return context.agent.suspend({ ask: 'confirm the payment' });
    if (resumeData != null && resumeData.ok !== true) return { status: 'declined' };
    return guardedPay(resumeData?.cents === undefined ? input : { ...input, cents: resumeData.cents }, toolCallId);
  };
  const scopeOption = memoryThreads ? {} : { scope: (_input, context) => context.requestContext.get('conversationId') };
  const schema = { id: TOOL, description: 'Pay an order', inputSchema: z.object({ orderId: z.string(), cents: z.number() }) };
  let tools;
  if (suspending) {
    // One tool at a time: idempotentTool as the execute of createTool.
    const suspension = { suspendSchema: z.object({ ask: z.string() }), resumeSchema: z.object({ ok: z.boolean(), cents: z.number().optional() }) };
    const guarded = control !== undefined ? execute : helper.idempotentTool(execute, { ...scopeOption, store, name: TOOL });
    tools = { [TOOL]: createTool({ ...schema, ...suspension, execute: guarded }) };
  } else {
    // The app's approval policy, in the request context; Mastra asks requireApproval with the
    // request context as a plain object (the helper must ask it the same way: it once passed the
    // RequestContext itself, and this read threw).
    const requireApproval = (_input, { requestContext }) => requestContext.policy.approval === true;
    const raw = { [TOOL]: createTool({ ...schema, requireApproval, execute }) };
    tools =
      control !== undefined
        ? raw
        : helper.idempotentTools(raw, { ...scopeOption, ...(businessKey ? { tools: { [TOOL]: { key: (input) => `order-${input.orderId}` } } } : {}), store });
  }
  const storage = new InMemoryStore();
  const agent = new Agent({
    id: 'payer',
    name: 'payer',
    instructions: 'Pay orders.',
    model,
    tools,
    ...(memoryThreads ? { memory: new MockMemory({ storage }) } : {}),
  });
  new Mastra({ agents: { payer: agent }, storage, logger: false });

  const convs = new Map(scenario.conversations.map((c) => [c.id, { ...c, keep: Infinity, calls: 0 }]));
  const requests = new Map(); // delivery -> what to send again
  const deliveries = [];

  /** The options of every request of a run: its id, its conversation, what the app puts in its request context. */
  const optionsOf = (request) => {
    const requestContext = new RequestContext();
    requestContext.set('conversationId', request.conv.id);
    requestContext.set('policy', { approval: request.approval !== undefined });
    requestContext.set('confirm', request.approval !== undefined);
    return {
      runId: request.runId,
      requestContext,
      maxSteps: request.steps.length + 2,
      ...(memoryThreads
        ? { memory: { thread: request.conv.id, resource: request.conv.caller, ...(request.keep === Infinity ? {} : { options: { lastMessages: request.keep } }) } }
        : {}),
    };
  };

  /** Streams one request of a run; its chunks, or Mastra's refusal (a run that is not suspended). */
  const drain = async (start) => {
    try {
      const out = await start();
      const chunks = [];
      for await (const chunk of out.fullStream) chunks.push(chunk);
      return chunks;
    } catch (error) {
      return [{ type: 'mastra-refused', error: String(error?.message ?? error) }];
    }
  };

  /**
   * Delivers a request: the run, then the user's answer to each approval or suspension it waits
   * for (`decision`: approve, edit, reject), sometimes twice at once. Returns every chunk seen.
   */
  const deliver = async (request, decision, doubled) => {
    script = request.steps;
    ledger.setCurrent(request.delivery);
    const options = optionsOf(request);
    let last = await drain(() => agent.stream('please pay', options));
    const seen = [...last];
    const answered = new Set();
    for (;;) {
      const waiting = last.find((c) => (c.type === 'tool-call-approval' || c.type === 'tool-call-suspended') && !answered.has(c.payload?.toolCallId));
      if (waiting === undefined) break;
      const toolCallId = waiting.payload.toolCallId;
      answered.add(toolCallId);
      const call = request.steps.flat().find((c) => c.id === toolCallId);
      const answer = async () => {
        if (suspending) {
          const resumeData = decision === 'reject' ? { ok: false } : decision === 'edit' ? { ok: true, cents: call.args.cents + 1 } : { ok: true };
          return drain(() => agent.resumeStream(resumeData, { ...options, toolCallId }));
        }
        if (decision === 'reject') {
          if (control === undefined) {
            const scope = request.conv.id; // as the tools have it: the thread id (memory), or the scope option's value
            await pkg.recordApproval(store, { scope, toolCallId, toolName: TOOL, turn: request.runId, decision: 'reject', reason: 'no' });
          }
          return drain(() => agent.declineToolCall({ ...options, toolCallId, reason: 'no' }));
        }
        return drain(() => agent.approveToolCall({ ...options, toolCallId }));
      };
      const answers = doubled ? await Promise.all([answer(), answer()]) : [await answer()];
      last = answers.flat();
      seen.push(...last);
    }
    return seen;
  };

  for (const event of scenario.events) {
    if (event.op === 'trim') {
      convs.get(event.conv).keep = event.keep;
      continue;
    }
    if (event.op === 'refresh') continue;
    if (event.op === 'ask') {
      const conv = convs.get(event.conv);
      // Numbered ids count from call_0 again in every run; on memory threads, in every thread.
      let k = memoryThreads ? conv.calls : 0;
      const steps = event.steps.map((calls) =>
        calls.map((c) => ({ ...c, id: conv.style === 'restart' ? `call_${k++}` : c.id, args: argsFor(c, businessKey, conv) })),
      );
      conv.calls = k;
      const request = { delivery: event.delivery, conv, runId: randomUUID(), steps, approval: event.approval, keep: conv.keep };
      requests.set(event.delivery, request);
      const chunks = await deliver(request, event.approval, event.approval !== undefined && rand.next() < 0.3);
      deliveries.push({ delivery: event.delivery, emitted: emitted(steps), seen: seenIn(chunks, steps, event.approval) });
      continue;
    }
    // resend: the request as it was sent, under its run id (a rejection flipped to approved when `flip`).
    const request = requests.get(event.of);
    const decision = event.flip ? 'approve' : request.approval;
    const chunks = await deliver({ ...request, delivery: event.delivery }, decision, request.approval !== undefined && rand.next() < 0.3);
    deliveries.push({ delivery: event.delivery, emitted: emitted(request.steps), seen: seenIn(chunks, request.steps, request.approval) });
  }
  ledger.setCurrent(null);
  await store.close();
  return deliveries;
}

/**
 * With a business key, each call of a conversation names its own order (a new call is a new
 * order): the conversation's first is o-1, its second o-2, so two conversations name the same
 * orders, which must stay two calls each. A malformed call keeps its order.
 */
function argsFor(call, businessKey, conv) {
  if (!businessKey || call.args.orderId.includes('\ud83d')) return call.args;
  conv.orders = (conv.orders ?? 0) + 1;
  return { ...call.args, orderId: `o-${conv.orders}` };
}

function emitted(steps) {
  return steps.flatMap((calls, step) => calls.map((c) => ({ meant: c.meant, toolCallId: c.id, args: c.args, step })));
}

/** What the caller was handed for each call: its results' receipts, or our refusal, or another error. */
function seenIn(chunks, steps, approval) {
  const seen = [];
  for (const call of steps.flat()) {
    const mine = chunks.filter((c) => c.payload?.toolCallId === call.id);
    const results = mine.filter((c) => c.type === 'tool-result');
    const errors = mine.filter((c) => c.type === 'tool-error').map((c) => String(c.payload.error?.message ?? c.payload.error));
    const receipts = receiptsIn(results.map((c) => c.payload.result));
    if (approval === 'reject' || mine.some((c) => c.type === 'tool-output-denied')) {
      seen.push({ meant: call.meant, receipts, refused: 'rejected' });
    } else if (errors.length > 0) {
      const text = errors[0];
      seen.push({ meant: call.meant, receipts, ...(text.includes('idempotent-tools') ? { refused: text.slice(0, 300) } : { error: text.slice(0, 300) }) });
    } else if (results.length === 0) {
      const refused = chunks.find((c) => c.type === 'mastra-refused');
      seen.push({ meant: call.meant, receipts: [], error: refused ? `mastra: ${refused.error.slice(0, 200)}` : 'no result for the call' });
    } else seen.push({ meant: call.meant, receipts });
  }
  return seen;
}
