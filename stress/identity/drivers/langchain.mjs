// The identity harness's driver for LangChain.js (langchain 1.5, @langchain/langgraph 1.7, the
// dev dependencies): `createAgent` with idempotentToolsMiddleware (idempotent-tools/langchain)
// and LangChain's humanInTheLoopMiddleware, a scripted chat model, MemorySaver; and a
// hand-built LangGraph graph whose ToolNode runs a tool wrapped with idempotentTool
// (idempotent-tools/langgraph). The caller's conversation is the thread
// (`configurable.thread_id`), which is what the helpers scope by.
//
// Each ask sends a new user message ('please pay', the same words every time) to the
// conversation's thread; the model answers in steps whose calls are the scenario's (ids
// restart at call_0 in every step, or are unique), then in text. An ask with an approval stops
// at humanInTheLoopMiddleware's interrupt and is resumed with one decision per call (approve,
// edit, reject); sometimes the resume is submitted twice at once. Sometimes the answer of a
// tool call is lost after its side effect (an outer middleware throws, or the node around the
// ToolNode does), and the run goes on from its last checkpoint (`invoke(null)`, or the node's
// RetryPolicy).
//
// A resend is what LangGraph can send again (never a new user message: that is a new turn):
//   fork    the ask's tools steps run again from the checkpoints before them (time travel);
//           every step but the last stops after its tools (`interruptAfter`), so the model is
//           never asked again for a step that holds calls
//   rerun   the ask run again from the checkpoint before its first model call: the model
//           answers with the same message (its id is the provider's, as a recorded or cached
//           response gives it), HITL asks again and is answered again (a rejection flipped to
//           approved when the scenario says `flip`); only for a model that names its messages
//   resume  an approval's interrupt resumed again from its checkpoint (LangGraph keeps the
//           first answer of a checkpoint, so a flip changes nothing there)
// A trim makes a beforeModel middleware keep only the conversation's last messages in the
// state (RemoveMessage), as a summarizing or trimming middleware does.
//
// `--control id|args` replaces the helper with controls.js (the tool's own wrapper).

import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..', '..', '..');
const require = createRequire(import.meta.url);
const { receiptsIn } = require('../ledger.js');
const { controlled } = require('../controls.js');
const { createRandom, deriveSeed } = require('../../faults/proxy.js');

const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || ROOT;
const pkg = require(PACKAGE);
const { idempotentToolsMiddleware } = require(join(PACKAGE, 'dist', 'integrations', 'langchain.js'));
const { idempotentTool } = require(join(PACKAGE, 'dist', 'integrations', 'langgraph.js'));
const { BaseChatModel } = require('@langchain/core/language_models/chat_models');
const { AIMessage, HumanMessage, RemoveMessage, ToolMessage } = require('@langchain/core/messages');
const { tool } = require('@langchain/core/tools');
const { Command, END, MemorySaver, MessagesAnnotation, REMOVE_ALL_MESSAGES, START, Send, StateGraph, isGraphInterrupt } = require('@langchain/langgraph');
const { ToolNode } = require('@langchain/langgraph/prebuilt');
const { createAgent, createMiddleware, humanInTheLoopMiddleware } = require('langchain');
const { z } = require('zod');

export const name = 'langchain';

/** Calls createAgent never dispatched to its tools node (see `delivery` in run()), over the whole process. */
const droppedByFramework = { count: 0 };
process.on('exit', () => {
  if (droppedByFramework.count > 0) {
    console.log(`  (langchain: ${droppedByFramework.count} calls with a reused id were never dispatched by createAgent's tools router, and are not counted)`);
  }
});

const ALL_APPROVALS = ['approve', 'edit', 'reject'];
/** A duplicate waits for the first call's result by polling the store: quicker than the default here (two resumes at once). */
const POLL_MS = 10;
const conversation = { kind: 'conversation', callers: 2, multiStep: true, parallel: true, trim: true };

/**
 * graph: 'agent' (createAgent with the middleware) or 'tool-node' (a StateGraph whose ToolNode
 * runs a tool wrapped with idempotentTool, fed one Send per call). messageIds: 'provider' (the
 * model names each message, and a recorded response names it again) or 'minted' (the model
 * names none: LangGraph's messages reducer gives each a new uuid). scope: 'thread' (the
 * default, configurable.thread_id) or 'user' (the middleware's `scope` option: the caller, from
 * the run's context). businessKey: the pay tool's `key` names the order.
 */
export const variants = [
  { name: 'thread', graph: 'agent', messageIds: 'provider', capabilities: { ...conversation, approvals: ALL_APPROVALS } },
  { name: 'minted-message-ids', graph: 'agent', messageIds: 'minted', capabilities: { ...conversation, approvals: ALL_APPROVALS } },
  { name: 'scope-user', graph: 'agent', messageIds: 'provider', scope: 'user', capabilities: { ...conversation, approvals: ['approve', 'reject'] } },
  { name: 'business-key', graph: 'agent', messageIds: 'provider', businessKey: true, capabilities: { ...conversation, approvals: ALL_APPROVALS, malformed: true } },
  { name: 'tool-node', graph: 'tool-node', messageIds: 'minted', capabilities: { ...conversation } },
];

/** What the scripted model answers now: the steps of the ask being delivered, and whose ids. */
class Script {
  steps = [];
  delivering = null; // the delivery under way (the ledger's)
  ask = null; // the ask whose answer the model gives (a resend gives the same answer again)
  seed = 0;
  #ledger;
  #current;
  constructor(ledger) {
    this.#ledger = ledger;
  }
  /** The ledger's current delivery and step, written only when they change (a file written and renamed). */
  setCurrent(delivery, step) {
    const current = `${delivery}|${step}`;
    if (current === this.#current) return;
    this.#current = current;
    this.#ledger.setCurrent(delivery, step);
  }
}

/**
 * A chat model that answers from the script: step n of the ask (n AI messages after the last
 * user message) makes that step's calls, then it answers in text. With `provider` ids each
 * message has an id of its own (the same when the same answer is given again).
 */
function scriptedModel(script, messageIds) {
  class ScriptedModel extends BaseChatModel {
    _llmType() {
      return 'scripted';
    }
    bindTools() {
      return this;
    }
    async _generate(messages) {
      let lastUser = -1;
      messages.forEach((m, i) => m.getType() === 'human' && (lastUser = i));
      const step = messages.slice(lastUser + 1).filter((m) => m.getType() === 'ai').length;
      const calls = script.steps[step] ?? [];
      script.setCurrent(script.delivering, step); // this step's calls run next
      const id = messageIds === 'provider' ? `chatcmpl-${createHash('sha256').update(`${script.seed}/${script.ask}/${step}`).digest('hex').slice(0, 24)}` : undefined;
      const message = new AIMessage({
        ...(id === undefined ? {} : { id }),
        content: calls.length > 0 ? '' : 'done',
        tool_calls: calls.map((c) => ({ id: c.id, name: 'pay', args: c.args, type: 'tool_call' })),
      });
      return { generations: [{ message, text: '' }] };
    }
  }
  return new ScriptedModel({});
}

/** The last `keep` messages, from a user message on (a state never holds a tool result without its call). */
function capped(messages, keep) {
  if (keep === Infinity) return messages;
  let tail = messages.slice(-keep);
  const firstUser = tail.findIndex((m) => m.getType() === 'human');
  if (firstUser === -1) {
    let last = -1;
    messages.forEach((m, i) => m.getType() === 'human' && (last = i));
    tail = messages.slice(Math.max(last, 0));
  } else tail = tail.slice(firstUser);
  return tail;
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

/** Our own refusals (a CannotTellError, a refused input, a key conflict): the helper's words, as the model gets them. */
const OURS = /idempotent-tools|CannotTellError|RefusedInputError|KeyMismatchError|lone surrogate|ApprovalMismatchError|ToolCallRejectedError/;

/**
 * What the caller was handed for the calls of `steps` (from step `from` on), read from the
 * state a run returned: step n's calls are answered by the tool messages after the n-th AI
 * message that follows the last user message. `reached(step, call)`: whether the call reached
 * the tools node in this delivery. A call with no answer that never reached it was not
 * dispatched by the framework (see `dropped` in run()): it is left out, not counted as seen.
 */
function seenIn(messages, steps, scenario, reached, from = 0) {
  let lastUser = -1;
  messages.forEach((m, i) => m.getType() === 'human' && (lastUser = i));
  const after = messages.slice(lastUser + 1);
  const ais = [];
  after.forEach((m, i) => m.getType() === 'ai' && ais.push(i));
  const seen = [];
  const dropped = [];
  steps.forEach((calls, step) => {
    if (step < from) return;
    const start = ais[step];
    const end = ais[step + 1] ?? after.length;
    const answers = start === undefined ? [] : after.slice(start + 1, end).filter((m) => m.getType() === 'tool');
    for (const call of calls) {
      const m = answers.find((t) => t.tool_call_id === call.id);
      const text = m === undefined ? '' : typeof m.content === 'string' ? m.content : JSON.stringify(m.content);
      if (m === undefined && !reached(step, call)) dropped.push(call.meant);
      else if (m === undefined) seen.push({ meant: call.meant, receipts: [], error: 'no answer to the call in the state' });
      else if (m.status === 'error' && scenario.meant[call.meant]?.expect === 'rejected') seen.push({ meant: call.meant, receipts: receiptsIn(text), refused: 'rejected' });
      else if (m.status === 'error') seen.push({ meant: call.meant, receipts: [], ...(OURS.test(text) ? { refused: text.slice(0, 300) } : { error: text.slice(0, 300) }) });
      else seen.push({ meant: call.meant, receipts: receiptsIn(text) });
    }
  });
  return { seen, dropped };
}

/** Which step of its ask a state's last AI message is: the AI messages after the last user message, less one. */
function stepOf(messages) {
  let lastUser = -1;
  messages.forEach((m, i) => m.getType() === 'human' && (lastUser = i));
  return messages.slice(lastUser + 1).filter((m) => m.getType() === 'ai').length - 1;
}

/** The checkpoints a run just wrote (newest first, down to the one its input started): where a resend starts from. */
async function checkpointsOfRun(graph, config) {
  const run = [];
  for await (const s of graph.getStateHistory(config)) {
    run.push(s);
    if (s.next.includes('__start__')) break;
  }
  return run.reverse();
}

export async function run(scenario, { ledger, control, variant, dir }) {
  const store = new pkg.SqliteStore({ path: join(dir, 'store.db') });
  const rand = createRandom(deriveSeed(scenario.seed, 36));
  const script = new Script(ledger);
  script.seed = scenario.seed;
  const model = scriptedModel(script, variant.messageIds);
  const businessKey = variant.businessKey === true;
  const reachedTools = new Set(); // `${delivery}|${step}|${tool call id}`: the calls that reached the tools node
  const agentGraph = variant.graph === 'agent';

  // Per delivery: whether HITL asks (this ask waits for approval), how many messages the state keeps,
  // whether the next tool answer is lost after its side effect.
  const now = { approval: false, keep: Infinity, loseAnswer: false };

  // The side effect: a payment, with its receipt in what the model gets.
  const pay = async (input, toolCallId) => JSON.stringify({ id: ledger.record({ toolCallId, args: input }), status: 'paid' });
  const schema = z.object({ orderId: z.string(), cents: z.number() });
  const guardedByControl = control === undefined ? undefined : controlled(control, pay, { idempotent: pkg.idempotent, store, name: 'pay' });

  let graph;
  if (agentGraph) {
    const payTool = tool(
      async (input, config) => (guardedByControl ? guardedByControl(input, config.toolCall?.id) : pay(input, config.toolCall?.id)),
      { name: 'pay', description: 'pay an order', schema },
    );
    // Outermost: an answer lost after the side effect (a proxy that timed out, a worker that
    // died before the checkpoint): the run fails, and is resumed from its last checkpoint.
    // A tool's error becomes the error ToolMessage ToolNode makes without middleware (with
    // any wrapToolCall middleware LangChain fails the run instead): the controls throw theirs.
    const lossy = createMiddleware({
      name: 'LossyTransport',
      wrapToolCall: async (request, handler) => {
        reachedTools.add(`${script.delivering}|${stepOf(request.state.messages)}|${request.toolCall.id}`);
        let answer;
        try {
          answer = await handler(request);
        } catch (err) {
          if (isGraphInterrupt(err)) throw err;
          return new ToolMessage({ status: 'error', content: `Error: ${err?.message ?? err}\n Please fix your mistakes.`, name: request.toolCall.name, tool_call_id: request.toolCall.id });
        }
        if (now.loseAnswer) {
          now.loseAnswer = false;
          throw new Error('the answer was lost on the way back');
        }
        return answer;
      },
    });
    const trim = createMiddleware({
      name: 'Trim',
      beforeModel: (state) => {
        const kept = capped(state.messages, now.keep);
        if (kept.length === state.messages.length) return undefined;
        return { messages: [new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), ...kept] };
      },
    });
    const guard =
      control === undefined
        ? [
            idempotentToolsMiddleware({
              store,
              pollIntervalMs: POLL_MS,
              ...(variant.scope === 'user' ? { scope: (_args, request) => ({ user: request.runtime.context.user }) } : {}),
              ...(businessKey ? { tools: { pay: { key: (input) => `order-${input.orderId}` } } } : {}),
            }),
          ]
        : [];
    const hitl = humanInTheLoopMiddleware({ interruptOn: { pay: { allowedDecisions: ALL_APPROVALS, when: () => now.approval } } });
    const agent = createAgent({ model, tools: [payTool], checkpointer: new MemorySaver(), middleware: [lossy, trim, ...guard, hitl] });
    graph = agent.graph;
  } else {
    // A hand-built graph: the model node, and a ToolNode fed one Send per call (a ToolNode fed
    // the whole state skips a call whose id already has an answer in the thread: a provider's
    // call_0 of a later turn would never run). The node around the ToolNode loses an answer
    // after the side effect; the node's RetryPolicy runs it again.
    const payTool = tool(
      control === undefined
        ? idempotentTool(async function pay(input, config) { return payAt(input, config); }, { store, pollIntervalMs: POLL_MS })
        : async (input, config) => guardedByControl(input, config.toolCall?.id),
      { name: 'pay', description: 'pay an order', schema },
    );
    const payAt = (input, config) => pay(input, config.toolCall?.id);
    const toolNode = new ToolNode([payTool]);
    const tools = async (input, config) => {
      const out = await toolNode.invoke(input, config);
      if (now.loseAnswer) {
        now.loseAnswer = false;
        throw new Error('the answer was lost on the way back');
      }
      return out;
    };
    const callModel = async (state) => {
      const kept = capped(state.messages, now.keep);
      const answer = await model.invoke(kept);
      return { messages: kept.length === state.messages.length ? [answer] : [new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), ...kept, answer] };
    };
    const route = (state) => {
      const last = state.messages.at(-1);
      if (!last?.tool_calls?.length) return END;
      return last.tool_calls.map((call) => new Send('tools', { ...state, lg_tool_call: call }));
    };
    graph = new StateGraph(MessagesAnnotation)
      .addNode('model', callModel)
      .addNode('tools', tools, { retryPolicy: { maxAttempts: 3, initialInterval: 1, jitter: false, logWarning: false, retryOn: (e) => /answer was lost/.test(String(e?.message)) } })
      .addEdge(START, 'model')
      .addConditionalEdges('model', route, ['tools', END])
      .addEdge('tools', 'model')
      .compile({ checkpointer: new MemorySaver() });
  }

  const convs = new Map(scenario.conversations.map((c) => [c.id, { ...c, keep: Infinity }]));
  const configOf = (conv) => ({ configurable: { thread_id: `thread-${conv.id}` }, context: { user: conv.caller } });
  const asks = new Map(); // delivery -> { conv, steps, approval, decisions, checkpoints }
  const deliveries = [];

  /**
   * What one delivery emitted and what its caller was handed, from the states its runs returned.
   * A call the framework never dispatched to its tools node (createAgent with an afterModel
   * middleware such as HITL sends only the calls whose ids no tool message in the thread
   * answers yet, when some do: a provider's call_0 of a later step, beside a new call_1) is no
   * call the helper saw: it is left out of the delivery, and counted in `droppedByFramework`.
   */
  const delivery = (name, steps) => {
    const seen = [];
    const dropped = new Set();
    const reached = (step, call) => !agentGraph || reachedTools.has(`${name}|${step}|${call.id}`);
    return {
      add(messages, from = 0, upTo = steps.length) {
        const r = seenIn(messages, steps.slice(0, upTo), scenario, reached, from);
        seen.push(...r.seen);
        for (const m of r.dropped) dropped.add(m);
      },
      done() {
        droppedByFramework.count += dropped.size;
        deliveries.push({ delivery: name, emitted: emitted(steps).filter((c) => !dropped.has(c.meant)), seen: seen.filter((x) => !dropped.has(x.meant)) });
      },
    };
  };

  const decisionsFor = (steps, approval) =>
    steps[0].map((c) => {
      if (approval === 'approve') return { type: 'approve' };
      if (approval === 'edit') return { type: 'edit', editedAction: { name: 'pay', args: scenario.meant[c.meant].edited } };
      return { type: 'reject', message: 'not this one' };
    });

  /** Runs `input` on the thread; an answer lost on the way back: the run resumed from its last checkpoint. */
  const invoke = async (input, config) => {
    try {
      return await graph.invoke(input, config);
    } catch (err) {
      if (!/answer was lost/.test(String(err?.message))) throw err;
      // From the thread's newest checkpoint (a fork's own, by now), with the same stops.
      return graph.invoke(null, { ...config, configurable: { thread_id: config.configurable.thread_id } });
    }
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
      if (businessKey) for (const call of steps.flat()) if (scenario.meant[call.meant].edited) scenario.meant[call.meant].edited = { ...call.args, cents: call.args.cents + 1 };
      Object.assign(script, { steps, delivering: event.delivery, ask: event.delivery });
      Object.assign(now, { approval: event.approval !== undefined, keep: conv.keep, loseAnswer: rand.chance(0.2) });
      script.setCurrent(event.delivery);
      const config = configOf(conv);
      let out = await invoke({ messages: [new HumanMessage('please pay')] }, config);
      const d = delivery(event.delivery, steps);
      let decisions;
      if (event.approval !== undefined) {
        if (!out.__interrupt__?.length) throw new Error(`${event.delivery}: humanInTheLoopMiddleware did not ask (${JSON.stringify(out.__interrupt__)})`);
        decisions = decisionsFor(steps, event.approval);
        script.setCurrent(event.delivery, 0);
        if (rand.chance(0.3)) {
          // The user's answer submitted twice at once (a double click).
          now.loseAnswer = false;
          const both = await Promise.all([invoke(new Command({ resume: { decisions } }), config), invoke(new Command({ resume: { decisions } }), config)]);
          d.add(both[0].messages);
          out = both[1];
        } else out = await invoke(new Command({ resume: { decisions } }), config);
      }
      d.add(out.messages);
      asks.set(event.delivery, { conv, steps, approval: event.approval, decisions, checkpoints: await checkpointsOfRun(graph, config) });
      d.done();
      continue;
    }

    // resend: the ask again, from its checkpoints.
    const ask = asks.get(event.of);
    const { conv, steps } = ask;
    const config = configOf(conv);
    Object.assign(script, { steps, delivering: event.delivery, ask: event.of });
    Object.assign(now, { approval: ask.approval !== undefined, keep: conv.keep, loseAnswer: rand.chance(0.2) });
    script.setCurrent(event.delivery);
    const d = delivery(event.delivery, steps);
    const at = (s) => ({ configurable: { ...s.config.configurable }, context: config.context });
    if (ask.approval === undefined) {
      const rerun = variant.messageIds === 'provider' && rand.chance(0.5);
      if (rerun) {
        // From the checkpoint before the first model call: the model gives the same answer again.
        const first = ask.checkpoints.find((s) => !s.next.includes('__start__'));
        const out = await invoke(null, at(first));
        d.add(out.messages);
      } else {
        // Each tools step from the checkpoint before it; all but the last stop after the tools.
        const before = ask.checkpoints.filter((s) => s.next.includes('tools'));
        for (const [i, s] of before.entries()) {
          const step = stepOf(s.values.messages);
          script.setCurrent(event.delivery, step);
          const last = i === before.length - 1;
          const out = await invoke(null, { ...at(s), ...(last ? {} : { interruptAfter: ['tools'] }) });
          d.add(out.messages, step, step + 1);
        }
      }
    } else {
      const decisions = event.flip ? ask.decisions.map(() => ({ type: 'approve' })) : ask.decisions;
      const rerun = variant.messageIds === 'provider' && rand.chance(0.6);
      let out;
      if (rerun) {
        // The turn run again from before its model call, and the approval answered again.
        const first = ask.checkpoints.find((s) => !s.next.includes('__start__'));
        const paused = await invoke(null, at(first));
        if (!paused.__interrupt__?.length) throw new Error(`${event.delivery}: the rerun of ${event.of} did not ask for approval`);
        script.setCurrent(event.delivery, 0);
        out = await invoke(new Command({ resume: { decisions } }), config);
      } else {
        // The interrupt resumed again from its own checkpoint.
        const asked = ask.checkpoints.find((s) => s.tasks.some((t) => t.interrupts?.length > 0));
        script.setCurrent(event.delivery, 0);
        out = await invoke(new Command({ resume: { decisions } }), at(asked));
      }
      d.add(out.messages);
    }
    d.done();
  }
  await store.close();
  return deliveries;
}
