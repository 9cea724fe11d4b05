// The identity harness's driver for the AI SDK (ai 6, the dev dependency; ai 7 runs the same
// driver from e2e/node22/identity/ai-sdk-7.mjs): idempotentTools over a tool set, driven by
// generateText with a scripted mock model (ai 6's MockLanguageModelV3, ai 7's V4), one chat per
// conversation (the helper's `scope`), approvals answered in the history
// (tool-approval-response) with recordApprovalResponses in the route, as docs/approvals.md says.
//
// Each ask appends a user message ('please pay': the same words every time) and runs one
// generation; its model steps emit the scenario's calls (ids restart at call_0 in every step,
// or are unique), then answer in text. A resend runs the request as it was sent; a trim caps
// what the chat sends. `--control id|args` replaces the helper with controls.js.

import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..', '..', '..');
const require = createRequire(import.meta.url);
const { receiptsIn } = require('../ledger.js');
const { controlled } = require('../controls.js');

/**
 * The driver over one installation of the AI SDK: `ai` (generateText, stepCountIs, tool), its
 * mock language model from `ai/test` (ai 6: MockLanguageModelV3; ai 7: MockLanguageModelV4), zod,
 * and the package (the repository's build, or the installed one).
 */
export function aiSdkDriver({ ai, MockLanguageModel, z, pkg, helper, version = 'ai 6' }) {
  const { generateText, stepCountIs, tool } = ai;
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

  async function run(scenario, { ledger, control, variant, dir }) {
    const store = new pkg.SqliteStore({ path: join(dir, 'store.db') });
    const businessKey = variant.name === 'business-key';
    const callSiteApproval = variant.name === 'tool-approval';
    // What the model says in the generation under way: the steps of the ask being delivered.
    let script = [];
    let delivering = null;
    const model = new MockLanguageModel({
      doGenerate: async ({ prompt }) => {
        let lastUser = -1;
        prompt.forEach((m, i) => m.role === 'user' && (lastUser = i));
        const step = prompt.slice(lastUser + 1).filter((m) => m.role === 'assistant').length;
        const calls = script[step];
        ledger.setCurrent(delivering, step); // this step's calls run next
        if (calls === undefined) return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
        return {
          content: calls.map((c) => ({ type: 'tool-call', toolCallId: c.id, toolName: 'pay', input: JSON.stringify(c.args) })),
          finishReason: { unified: 'tool-calls', raw: undefined },
          usage,
          warnings: [],
        };
      },
    });

    // The side effect: a payment, with its receipt in what the model gets.
    const pay = async (input, toolCallId) => ({ id: ledger.record({ toolCallId, args: input }), status: 'paid' }); // as a payment API answers: its own id
    const payTool = (execute) =>
      tool({
        inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
        // ai 7's call-site toolApproval (the tool-approval variant) asks instead of the tool.
        ...(callSiteApproval ? {} : { needsApproval: async (_input, options) => Boolean(contextOf(options).approval) }),
        execute,
      });
    let tools;
    if (control !== undefined) {
      const guarded = controlled(control, pay, { idempotent: pkg.idempotent, store, name: 'pay' });
      tools = { pay: payTool(async (input, options) => guarded(input, options.toolCallId)) };
    } else {
      tools = helper.idempotentTools(
        { pay: payTool(async (input, options) => pay(input, options.toolCallId)) },
        {
          store,
          scope: (_input, options) => contextOf(options).chatId,
          ...(businessKey ? { tools: { pay: { key: (input) => `order-${input.orderId}` } } } : {}),
        },
      );
    }

    const convs = new Map(scenario.conversations.map((c) => [c.id, { ...c, history: [], keep: Infinity }]));
    const requests = new Map(); // delivery -> what to send again
    const deliveries = [];

    const generate = (delivery, conv, messages, steps, approval) => {
      script = steps;
      delivering = delivery;
      ledger.setCurrent(delivery, 0); // approved calls run before the first step
      const context = { chatId: conv.id, approval };
      const asked = callSiteApproval ? { toolApproval: { pay: approval ? 'user-approval' : 'not-applicable' } } : {};
      return generateText({ model, tools, messages, stopWhen: stepCountIs(steps.length + 2), ...contextOption(version, context), ...asked });
    };

    for (const event of scenario.events) {
      if (event.op === 'trim') {
        convs.get(event.conv).keep = event.keep;
        continue;
      }
      if (event.op === 'refresh') continue;
      if (event.op === 'ask') {
        const conv = convs.get(event.conv);
        const steps = event.steps.map((calls) => calls.map((c) => ({ ...c, args: argsFor(c, businessKey, conv) })));
        conv.history.push({ role: 'user', content: 'please pay' });
        ledger.setCurrent(event.delivery);
        let sent = capped(conv.history, conv.keep);
        // What the helper cannot tell, and must refuse (docs/frameworks.md): a numbered id
        // (call_0) in a turn whose history shows no earlier answer, with no business key: every
        // step of that generation.
        if (control === undefined && !businessKey && event.approval === undefined && conv.style === 'restart' && !sent.some((m) => m.role === 'assistant')) {
          for (const call of steps.flat()) scenario.meant[call.meant].expect = 'refused';
        }
        let r = await generate(event.delivery, conv, sent, steps, event.approval !== undefined);
        conv.history.push(...responseMessages(r));
        let request = { conv, messages: sent, steps, approval: event.approval };
        if (event.approval !== undefined) {
          // The user answers every approval request; the route records the answers, then generates.
          const asked = r.content.filter((p) => p.type === 'tool-approval-request');
          const approved = event.approval !== 'reject';
          conv.history.push({ role: 'tool', content: asked.map((a) => ({ type: 'tool-approval-response', approvalId: a.approvalId, approved, ...(approved ? {} : { reason: 'no' }) })) });
          sent = capped(conv.history, conv.keep);
          if (control === undefined) await helper.recordApprovalResponses(sent, { scope: conv.id, store });
          r = await generate(event.delivery, conv, sent, steps, true);
          conv.history.push(...responseMessages(r));
          request = { ...request, messages: sent };
        }
        requests.set(event.delivery, request);
        deliveries.push({ delivery: event.delivery, emitted: emitted(steps), seen: seenIn(r, steps, event.approval) });
        continue;
      }
      // resend: the request as it was sent (with a rejection flipped to approved when `flip`).
      const request = requests.get(event.of);
      let messages = request.messages;
      if (event.flip) messages = messages.map((m) => (m.role === 'tool' ? { ...m, content: m.content.map((p) => (p.type === 'tool-approval-response' ? { type: p.type, approvalId: p.approvalId, approved: true } : p)) } : m));
      ledger.setCurrent(event.delivery);
      if (request.approval !== undefined && control === undefined) await helper.recordApprovalResponses(messages, { scope: request.conv.id, store });
      const r = await generate(event.delivery, request.conv, messages, request.steps, request.approval !== undefined);
      deliveries.push({ delivery: event.delivery, emitted: emitted(request.steps), seen: seenIn(r, request.steps, request.approval) });
    }
    await store.close();
    return deliveries;
  }

  return { name: `ai-sdk (${version})`, variants: version === 'ai 7' ? [...VARIANTS, AI7_VARIANT] : VARIANTS, run };
}

export const VARIANTS = [
  { name: 'scope', capabilities: { kind: 'conversation', callers: 2, multiStep: true, parallel: true, trim: true, approvals: ['approve', 'reject'] } },
  { name: 'business-key', capabilities: { kind: 'conversation', callers: 2, multiStep: true, trim: true, malformed: true } },
];
/** ai 7 also asks for approval at the call site: generateText's toolApproval, the tools without needsApproval. */
const AI7_VARIANT = { name: 'tool-approval', capabilities: VARIANTS[0].capabilities };

/** ai 5 and 6 give the tools `experimental_context`; ai 7 the tool's own context, from toolsContext. */
function contextOption(version, context) {
  return version === 'ai 7' ? { toolsContext: { pay: context } } : { experimental_context: context };
}
function contextOf(options) {
  return options.context ?? options.experimental_context;
}
/**
 * Every message a generation answered with. ai 6's `response.messages` holds them all; ai 7's
 * holds the last step's only, and `responseMessages` holds them all (with the results of the
 * calls approved or denied in the request, which run before the first step).
 */
function responseMessages(r) {
  return r.responseMessages ?? r.response.messages;
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

/** The last `keep` messages, from a user message on (a chat never sends a tool result without its call). */
function capped(history, keep) {
  if (keep === Infinity) return [...history];
  let tail = history.slice(-keep);
  const firstUser = tail.findIndex((m) => m.role === 'user');
  if (firstUser === -1) {
    let last = -1;
    history.forEach((m, i) => m.role === 'user' && (last = i));
    tail = history.slice(last);
  } else tail = tail.slice(firstUser);
  return tail;
}

function emitted(steps) {
  return steps.flatMap((calls, step) => calls.map((c) => ({ meant: c.meant, toolCallId: c.id, args: c.args, step })));
}

/** What the model was handed for each call: its result's receipts, or our refusal, or another error. */
function seenIn(r, steps, approval) {
  const seen = [];
  // An approved call runs before the generation's first step: its result leads the response's messages.
  const answers = responseMessages(r).filter((m) => m.role === 'tool').flatMap((m) => m.content);
  steps.forEach((calls, i) => {
    const stepParts = approval !== undefined ? answers : r.steps[i - (approval !== undefined ? 1 : 0)]?.content ?? [];
    for (const call of calls) {
      const part = [...stepParts].reverse().find((p) => p.toolCallId === call.id && (p.type === 'tool-result' || p.type === 'tool-error'));
      const output = part?.type === 'tool-error' ? { type: 'error-text', value: String(part.error?.message ?? part.error) } : part?.output;
      if (approval === 'reject' || output?.type === 'execution-denied') {
        seen.push({ meant: call.meant, receipts: receiptsIn(output ?? ''), refused: 'rejected' });
      } else if (output?.type === 'error-text' || output?.type === 'error-json') {
        const text = String(output.value);
        seen.push({ meant: call.meant, receipts: [], ...(text.includes('idempotent-tools') ? { refused: text.slice(0, 300) } : { error: text.slice(0, 300) }) });
      } else if (output === undefined) {
        seen.push({ meant: call.meant, receipts: [], error: 'no result for the call' });
      } else seen.push({ meant: call.meant, receipts: receiptsIn(output) });
    }
  });
  return seen;
}

// ai 6 from the repository's dev dependencies, the package as built in the repository (or
// in IDENTITY_PACKAGE_ROOT: another build, such as an older commit's, to see what it did).
const ai = require('ai');
const { MockLanguageModelV3 } = require('ai/test');
const { z } = require('zod');
const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || ROOT;
const pkg = require(PACKAGE);
const helper = require(join(PACKAGE, 'dist', 'integrations', 'ai-sdk.js'));
const driver = aiSdkDriver({ ai, MockLanguageModel: MockLanguageModelV3, z, pkg, helper });
export const { name, variants, run } = driver;
