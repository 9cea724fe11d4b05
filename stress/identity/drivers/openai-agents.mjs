// The identity harness's driver for OpenAI Agents JS (@openai/agents-core 0.14, the dev
// dependency; the current @openai/agents runs the same driver from
// e2e/node22/identity/openai-agents.mjs): idempotentTools over an Agent's tools (or the per-tool
// idempotentTool as a tool's execute), driven by the real Runner with a scripted Model, one
// conversation per scope (its id in the run context, as docs/frameworks.md says), approvals
// through the RunState (state.approve, and rejectToolCall beside state.reject), saved RunStates
// resumed from their strings.
//
// Two kinds of model, as the SDK's adapters give their calls to the tools:
//   responses  the Responses API: every output item has an id of its own (fc_...)
//   chat       Chat Completions through an adapter that gives no item id: 'FAKE_ID' (as
//              @openai/agents-openai writes while it streams), '__fake_id__', or none
// Call ids follow the conversation's style: numbered (call_0, call_1 in every response) or
// unique (call_ and 24 characters). A scripted model answers the same request the same way
// (ids and all), as a deterministic model or a response cache does.
//
// Each ask appends a user message ('please pay') and runs the agent on the conversation's
// history (capped when trimmed); the model's responses are the ask's steps, then text. An ask
// that needs approval interrupts: the user approves (state.approve) or rejects
// (rejectToolCall) every interruption, and the run goes on through its later steps, whose
// calls are asked about again, or reuse an id the run already holds a decision for (issue 36,
// finding 4; the scenario generator's `approvalSteps`). A resend of an ask is the same input
// again (a fresh run), or, for an approval, a RunState saved after the decisions at one of its
// interruptions, resumed from its string (once, or twice at once), or the state saved before a
// rejection, resumed and approved (`flip`); what the helper cannot tell across runs is left
// out unless IDENTITY_OPENAI_AGENTS_UNTELLABLE=1 (see UNTELLABLE). `--control id|args` replaces
// the helper with controls.js.

import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..', '..', '..');
const require = createRequire(import.meta.url);
const { receiptsIn } = require('../ledger.js');
const { controlled } = require('../controls.js');

/** What a rejection tells the model (rejectToolCall's message, state.reject's). */
const REJECTED = 'not approved: rejected by the user';

/** The item id a Chat Completions-style model gives its calls, per conversation. */
const CHAT_ITEM_IDS = ['FAKE_ID', '__fake_id__', undefined];

/**
 * The driver over one installation of the Agents SDK: `agents` (Agent, Runner, RunState,
 * RunContext, Usage, tool, setTracingDisabled, from @openai/agents-core or @openai/agents), zod, and the
 * package (the repository's build, or the installed one). `numbering`: how a provider that
 * numbers its calls numbers them, 'response' (call_0 again in every response; agents-core
 * 0.14 runs such calls) or 'run' (call_0, call_1, ... across the responses of one run, call_0
 * again in the next: agents-core 0.20 fails a run whose later response reuses a call id for
 * other arguments, "Tool call ID call_0 was reused for a different invocation", and takes one
 * with the same arguments for the call it already ran, so a provider that restarts per
 * response cannot run several steps on it).
 */
export function openaiAgentsDriver({ agents, z, pkg, helper, version = '@openai/agents-core 0.14', numbering = 'response' }) {
  const { Agent, RunContext, Runner, RunState, Usage, tool, setTracingDisabled } = agents;
  setTracingDisabled(true);

  /**
   * A scripted model for one run: the ask's steps from `script.next` on (a resumed run goes on
   * after the step it was saved at). Its calls run before its next response: `lastStep`.
   */
  function scriptedModel(script) {
    return {
      async getResponse() {
        const s = script.next++;
        script.lastStep = s;
        const calls = script.steps[s];
        if (calls === undefined) return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] };
        return {
          usage: new Usage(),
          ...(script.model.kind === 'responses' ? { responseId: `resp_${script.ask}_${s}` } : {}),
          output: calls.map((c, i) => {
            const id = script.model.kind === 'responses' ? `fc_${script.ask}_${s}_${i}` : script.model.itemId;
            return { type: 'function_call', ...(id === undefined ? {} : { id }), callId: c.id, name: 'pay', arguments: JSON.stringify(c.args), status: 'completed' };
          }),
        };
      },
      // eslint-disable-next-line require-yield
      async *getStreamedResponse() {
        throw new Error('identity driver: streaming is not scripted');
      },
    };
  }

  async function run(scenario, { ledger, control, variant, dir }) {
    const store = new pkg.SqliteStore({ path: join(dir, 'store.db') });
    const { models, businessKey = false, perTool = false } = variant.helper;
    const scope = (_input, runContext) => runContext.context.conversationId;

    // The script of each run, by its RunContext (what the tools get): runs resumed at once
    // each have their own, and a side effect is recorded with its run's delivery and step.
    const scripts = new WeakMap();
    // The side effect: a payment, with its receipt in what the model gets.
    const pay = async (input, runContext, callId) => {
      const script = scripts.get(runContext);
      if (script === undefined) throw new Error('identity driver: a tool ran in a run the driver did not start');
      ledger.setCurrent(script.delivery, script.lastStep); // synchronously with the record: runs at once do not mix
      return { id: ledger.record({ toolCallId: callId ?? null, args: input }), status: 'paid' };
    };
    const parameters = z.object({ orderId: z.string(), cents: z.number() });
    const needsApproval = async (runContext) => Boolean(runContext.context.approval);
    let tools;
    if (control !== undefined) {
      // The control keys by (args, id) only: the run reaches the side effect through the async context.
      const runOf = new AsyncLocalStorage();
      const guarded = controlled(control, (input, callId) => pay(input, runOf.getStore(), callId), { idempotent: pkg.idempotent, store, name: 'pay' });
      tools = [tool({ name: 'pay', description: 'Pay an order', parameters, needsApproval, execute: async (input, rc, details) => runOf.run(rc, () => guarded(input, details?.toolCall?.callId)) })];
    } else if (perTool) {
      const execute = helper.idempotentTool(async function pay_(input, rc, details) {
        return pay(input, rc, details?.toolCall?.callId);
      }, { store, scope, name: 'pay', ...(businessKey ? { key: (input) => `order-${input.orderId}` } : {}) });
      tools = [tool({ name: 'pay', description: 'Pay an order', parameters, needsApproval, execute })];
    } else {
      const own = tool({ name: 'pay', description: 'Pay an order', parameters, needsApproval, execute: async (input, rc, details) => pay(input, rc, details?.toolCall?.callId) });
      tools = helper.idempotentTools([own], { store, scope, ...(businessKey ? { tools: { pay: { key: (input) => `order-${input.orderId}` } } } : {}) });
    }
    const runner = new Runner();
    // A new Agent (the same name and tools) per run, so that runs at once each have their script.
    const agentFor = (script) => new Agent({ name: 'payer', instructions: 'Pay the orders you are asked to pay.', model: scriptedModel(script), tools });
    const start = (state, script) => {
      scripts.set(state._context, script);
      return runner.run(agentFor(script), state);
    };

    const convs = new Map(
      scenario.conversations.map((c, i) => [c.id, { ...c, history: [], keep: Infinity, model: modelOf(models, i) }]),
    );
    const asks = new Map(); // delivery -> what to send again
    const deliveries = [];

    /** Answers every interruption of `result` as the ask says, and runs on until none is left; the states saved on the way. */
    async function decide(result, ask, script, saved) {
      while (result.interruptions?.length > 0) {
        const at = script.lastStep;
        saved.before.push({ text: result.state.toString(), step: at });
        for (const item of result.interruptions) {
          if (ask.approval !== 'reject') result.state.approve(item);
          else if (control === undefined) await helper.rejectToolCall(result.state, item, { scope, store, message: REJECTED });
          else result.state.reject(item, { message: REJECTED });
        }
        saved.decided.push({ text: result.state.toString(), step: at });
        result = await start(result.state, script);
      }
      return result;
    }

    /** One run of an ask: a fresh run on `input`, through its approvals. */
    async function fresh(ask, delivery, input, saved = { before: [], decided: [] }) {
      const script = { ...ask.script, delivery, next: 0, lastStep: -1 };
      const context = new RunContext({ conversationId: ask.conv.id, approval: ask.approval !== undefined });
      scripts.set(context, script);
      ledger.setCurrent(delivery);
      let result = await runner.run(agentFor(script), input, { context });
      result = await decide(result, ask, script, saved);
      return { result, saved };
    }

    /** A saved state resumed from its string; `approveAll`: its pending calls approved first (a rejection resubmitted). */
    async function resume(ask, delivery, { text, step }, approveAll) {
      const script = { ...ask.script, delivery, next: step + 1, lastStep: step };
      const state = await RunState.fromString(agentFor(script), text);
      if (approveAll) for (const item of state.getInterruptions()) state.approve(item);
      ledger.setCurrent(delivery);
      return decide(await start(state, script), ask, script, { before: [], decided: [] });
    }

    for (const event of scenario.events) {
      if (event.op === 'trim') {
        convs.get(event.conv).keep = event.keep;
        continue;
      }
      if (event.op === 'refresh') continue;
      if (event.op === 'ask') {
        const conv = convs.get(event.conv);
        let counted = 0; // numbering 'run': the ask's numbered calls counted across its steps
        const steps = event.steps.map((calls) =>
          calls.map((c) => ({ ...c, ...(numbering === 'run' && conv.style === 'restart' ? { id: `call_${counted++}` } : {}), args: argsFor(c, businessKey, conv) })),
        );
        const ask = { conv, approval: event.approval, steps, script: { ask: event.delivery, steps, model: conv.model } };
        expectations(scenario, ask, { control, businessKey, perTool });
        conv.history.push({ role: 'user', content: 'please pay' });
        const input = capped(conv.history, conv.keep);
        ask.input = input;
        let seen;
        try {
          const { result, saved } = await fresh(ask, event.delivery, input);
          ask.saved = saved;
          conv.history.push(...result.history.slice(input.length));
          seen = seenIn([result], steps, event.approval);
        } catch (err) {
          seen = failed(steps, err);
        }
        asks.set(event.delivery, ask);
        if (event.approval !== undefined) {
          conv.approvalAsk = event.delivery;
          // The calls whose turns idempotentTools keeps (see twinKept).
          conv.keptCalls = [...(conv.keptCalls ?? []), ...steps.flat().map((c) => ({ ask: event.delivery, id: c.id, args: JSON.stringify(c.args) }))];
        }
        deliveries.push({ delivery: event.delivery, emitted: emitted(steps), seen });
        continue;
      }
      // resend: the same calls again, as the runtime delivers them again (within what the
      // helper can tell: see UNTELLABLE).
      const ask = asks.get(event.of);
      const n = Number(event.delivery.slice(1));
      const numbered = ask.conv.style === 'restart' && control === undefined && !UNTELLABLE;
      // idempotentTools keeps, per call id of a conversation, the newest turn: only the
      // conversation's latest approval ask is resumed. Without item ids or a business key,
      // nothing tells runs apart: no fresh run, and only the last saved state.
      const latestOnly = numbered && !perTool;
      const blind = latestOnly && ask.conv.model.kind === 'chat' && !businessKey;
      const latest = ask.conv.approvalAsk === event.of;
      let results;
      try {
        if (ask.saved === undefined) throw new Error(`the ask ${event.of} failed, nothing to send again`);
        // Which of the run's saved states (one per interruption) is resumed: each in turn, from
        // the last (blind: the last; the per-tool helper knows no saved run's calls: the first).
        const pick = (list) => (blind ? list.at(-1) : numbered && perTool ? list[0] : list.at(-1 - (Math.floor(n / 3) % list.length)));
        if (event.flip && ask.saved.before.length > 0) {
          // A run saved before a rejection, resumed and approved: still never runs.
          if (latestOnly && !latest) continue;
          results = [await resume(ask, event.delivery, pick(ask.saved.before), true)];
        } else if (ask.approval !== undefined && ask.saved.decided.length > 0 && (n % 3 !== 0 || blind)) {
          // A state saved after the decisions, resumed from its string: once, or twice at once.
          if (latestOnly && !latest) continue;
          if (blind && twinKept(ask, event.of)) continue;
          const state = pick(ask.saved.decided);
          results = n % 3 === 1 ? [await resume(ask, event.delivery, state, false)] : await Promise.all([resume(ask, event.delivery, state, false), resume(ask, event.delivery, state, false)]);
        } else {
          // The same input again: a fresh run, the model answering as it did.
          if (blind) continue;
          results = [(await fresh(ask, event.delivery, ask.input)).result];
        }
        deliveries.push({ delivery: event.delivery, emitted: emitted(ask.steps), seen: seenIn(results, ask.steps, ask.approval) });
      } catch (err) {
        deliveries.push({ delivery: event.delivery, emitted: emitted(ask.steps), seen: failed(ask.steps, err) });
      }
    }
    await store.close();
    return deliveries;
  }

  return { name: `openai-agents (${version})`, variants: VARIANTS, run };
}

/**
 * Whether an earlier approval ask of the conversation kept a turn for one of this ask's calls
 * with the same call id and arguments: without item ids, a saved state of this ask resumed
 * after its call ran could be either ask's, and idempotentTools refuses it (CannotTellError,
 * `key`) rather than guess (see UNTELLABLE).
 */
function twinKept(ask, delivery) {
  const mine = ask.steps.flat().map((c) => `${c.id}\0${JSON.stringify(c.args)}`);
  return (ask.conv.keptCalls ?? []).some((k) => k.ask !== delivery && mine.includes(`${k.id}\0${k.args}`));
}

/**
 * What the helper cannot tell, and the driver does not ask of it unless
 * IDENTITY_OPENAI_AGENTS_UNTELLABLE=1 (then the chat-completions and approvals variants show
 * ran-twice, result-of-another-call, not-refused and needless-refusal). A provider that numbers
 * its call ids (call_0 in every response) gives the tool nothing that tells one run's call_0
 * from another's: idempotentTools tells the calls of one run apart (a turn minted at each
 * needsApproval ask), and keeps, per call id of a conversation, the newest turn asked for
 * approval, with the calls its run had made (for a saved run resumed from its string). So:
 *   - without item ids or a business key, the same input run again (the model answering as
 *     it did) runs its calls again; a state resumed before its last interruption asks the
 *     model again, and the later response's new calls are minted and approved again: they
 *     run again;
 *   - a saved state resumed after a later ask of the conversation asked approval for the same
 *     call id finds its own turn by its arguments, and by which kept turn no run has taken yet;
 *     where both asks' calls had the same arguments and both ran (a state resumed again), it is
 *     refused (CannotTellError naming "key", `twinKept`: the driver leaves those resends out);
 *     with other calls in the run, a later reuse of an id approved before the save, or a
 *     pending call taken for made, may still follow the newest kept turn's calls (the driver
 *     resumes only the conversation's latest approval ask);
 *   - the per-tool idempotentTool keeps nothing: a state resumed at a later interruption does
 *     not know the calls its run made before, and a later response reusing one of their ids
 *     runs under the earlier approval.
 * Where a guess could hand one call another's result, the helper now refuses; what is left
 * above runs a call again or refuses one needlessly, and never shares a result.
 */
const UNTELLABLE = process.env.IDENTITY_OPENAI_AGENTS_UNTELLABLE === '1';

const CONVERSATION = { kind: 'conversation', callers: 2, multiStep: true, parallel: true, trim: true };
export const VARIANTS = [
  { name: 'responses', helper: { models: ['responses'] }, capabilities: { ...CONVERSATION, approvals: ['approve', 'reject'], approvalSteps: true } },
  { name: 'chat-completions', helper: { models: ['chat'] }, capabilities: { ...CONVERSATION, approvals: ['approve', 'reject'], approvalSteps: true } },
  { name: 'business-key', helper: { models: ['responses', 'chat'], businessKey: true }, capabilities: { ...CONVERSATION, malformed: true, approvals: ['approve', 'reject'], approvalSteps: true } },
  { name: 'per-tool', helper: { models: ['responses', 'chat'], perTool: true }, capabilities: { ...CONVERSATION, approvals: ['approve', 'reject'], approvalSteps: true } },
  // Approvals over several responses of a provider that numbers its calls, often: runs
  // interrupted more than once, saved at a later interruption and resumed, whose later
  // responses reuse an id approved before the save (issue 36, finding 4 through a saved run).
  {
    name: 'approvals',
    helper: { models: ['responses', 'chat'] },
    capabilities: { ...CONVERSATION, idStyles: ['restart'], approvals: ['approve', 'approve', 'reject'], approvalSteps: true, rates: { approval: 0.8, parallel: 0.5 } },
  },
];

/** The model of the i-th conversation: the variant's kinds in turn; Chat Completions-style ones with each placeholder in turn. */
function modelOf(models, i) {
  const kind = models[i % models.length];
  if (kind === 'responses') return { kind };
  return { kind, itemId: CHAT_ITEM_IDS[Math.floor(i / models.length) % CHAT_ITEM_IDS.length] };
}

/**
 * What the helper refuses, as its docs say (docs/frameworks.md, OpenAI Agents JS), marked in
 * the scenario before the ask is made:
 * - the per-tool idempotentTool cannot see a new call: a model without item ids whose call
 *   ids are numbered is refused (CannotTellError naming "key"), unless a business key names
 *   the call (a unique call id names it by itself);
 * - in a run that holds a decision for a call id, a later response's call reusing that id is
 *   not asked about again by the Runner: an approved one is refused (its approval covered the
 *   earlier call only; issue 36, finding 4), a rejected one stays rejected.
 */
function expectations(scenario, ask, { control, businessKey, perTool }) {
  if (control !== undefined) return;
  const idless = ask.conv.model.kind === 'chat';
  const numbered = ask.conv.style === 'restart';
  const decided = new Set();
  ask.steps.forEach((calls) => {
    for (const call of calls) {
      const m = scenario.meant[call.meant];
      if (m.expect !== 'run') continue;
      if (perTool && idless && numbered && !businessKey) m.expect = 'refused';
      else if (ask.approval === 'approve' && decided.has(call.id)) m.expect = 'refused';
    }
    if (ask.approval !== undefined) for (const call of calls) decided.add(call.id);
  });
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

/** The last `keep` items, from a user message on (a conversation never sends a tool result without its call). */
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

function failed(steps, err) {
  const text = String(err?.stack ?? err).slice(0, 300);
  return steps.flat().map((c) => ({ meant: c.meant, receipts: [], error: `the run failed: ${text}` }));
}

/**
 * What the model was handed for each call, in each run: the outputs of a call id in the order
 * of the steps that made it (the Runner answers the calls of one response before the next).
 */
function seenIn(results, steps, approval) {
  const seen = [];
  for (const result of results) {
    const outputs = new Map();
    for (const item of result.newItems) {
      if (item.type !== 'tool_call_output_item') continue;
      const id = item.rawItem?.callId;
      outputs.set(id, [...(outputs.get(id) ?? []), item.output]);
    }
    for (const calls of steps) {
      for (const call of calls) {
        const list = outputs.get(call.id) ?? [];
        const output = list.shift();
        if (output === undefined) {
          seen.push({ meant: call.meant, receipts: [], error: 'no result for the call' });
          continue;
        }
        const text = typeof output === 'string' ? output : JSON.stringify(output);
        if (approval === 'reject' || text === REJECTED) seen.push({ meant: call.meant, receipts: receiptsIn(text), refused: 'rejected' });
        else if (text.startsWith('An error occurred while running the tool')) {
          seen.push({ meant: call.meant, receipts: [], ...(text.includes('idempotent-tools') ? { refused: text.slice(0, 300) } : { error: text.slice(0, 300) }) });
        } else seen.push({ meant: call.meant, receipts: receiptsIn(text) });
      }
    }
  }
  return seen;
}

// @openai/agents-core from the repository's dev dependencies, the package as built in the
// repository (or in IDENTITY_PACKAGE_ROOT: another build, such as an older commit's).
const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || ROOT;
const driver = openaiAgentsDriver({
  agents: require('@openai/agents-core'),
  z: require('zod').z,
  pkg: require(PACKAGE),
  helper: require(join(PACKAGE, 'dist', 'integrations', 'openai-agents.js')),
});
export const { name, variants, run } = driver;
