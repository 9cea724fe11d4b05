// idempotent-tools/langgraph end to end: real LangGraph.js graphs, a scripted fake chat
// model, real SqliteStore files. Each test counts the side effect.

import { createRequire } from 'node:module';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { Command, END, MemorySaver, MessagesAnnotation, START, StateGraph, interrupt } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const lg: typeof import('../dist/integrations/langgraph.js') = require(`${ROOT}/dist/integrations/langgraph.js`);
const { idempotentTool, toolCallContext, threadStepContext, stripTaskIds } = lg;
const { SqliteStore } = lib;

type ToolCall = { id: string; name: string; args: Record<string, unknown> };

/** A chat model that answers from a script: tool calls for the human turn, then text. */
class ScriptedChatModel extends BaseChatModel {
  calls = 0;
  constructor(private readonly toolCalls: ToolCall[]) {
    super({});
  }
  _llmType() {
    return 'scripted';
  }
  bindTools() {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.calls++;
    const last = messages[messages.length - 1];
    const message =
      last.getType() === 'human'
        ? new AIMessage({ content: '', tool_calls: this.toolCalls.map((c) => ({ ...c, type: 'tool_call' as const })) })
        : new AIMessage(`done after ${messages.filter((m) => m.getType() === 'tool').length} tool results`);
    return { generations: [{ message, text: typeof message.content === 'string' ? message.content : '' }] };
  }
}

interface Setup {
  payments: Array<{ orderId: string; cents: number }>;
  events: string[];
  seen: Array<{ step: unknown; ns: unknown; toolCallId: unknown }>;
  store: InstanceType<typeof SqliteStore>;
}

/** The side-effecting tool: each real charge lands in `payments`. */
function paymentTool(s: Setup) {
  const sendPayment = idempotentTool(
    async function sendPayment(input: { orderId: string; cents: number }) {
      s.payments.push(input);
      return { receipt: `r-${input.orderId}-${s.payments.length}` };
    },
    { store: s.store, onEvent: (e) => s.events.push(e.type) },
  );
  return tool(
    (input: { orderId: string; cents: number }, config) => {
      // What the framework passed, each time it called the tool.
      s.seen.push({ step: config.metadata?.langgraph_step, ns: config.configurable?.checkpoint_ns, toolCallId: config.toolCall?.id });
      return sendPayment(input, config);
    },
    { name: 'send_payment', description: 'charge', schema: z.object({ orderId: z.string(), cents: z.number() }) },
  );
}

function setup(path = tempDb()): Setup {
  return { payments: [], events: [], seen: [], store: new SqliteStore({ path }) };
}

function graphOf(model: ScriptedChatModel, tools: ConstructorParameters<typeof ToolNode>[0], checkpointer: MemorySaver, toolNode: Partial<{ handleToolErrors: boolean; retry: boolean }> = {}) {
  const node = new ToolNode(tools, { handleToolErrors: toolNode.handleToolErrors ?? true });
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode('tools', node, toolNode.retry ? { retryPolicy: { maxAttempts: 3, initialInterval: 1, jitter: false, logWarning: false, retryOn: () => true } } : {})
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? 'tools' : END))
    .addEdge('tools', 'agent')
    .compile({ checkpointer });
}

/** Resolves when the store has recorded the first `executed` event (no sleeps). */
function executed(s: Setup): Promise<void> {
  return new Promise((done) => {
    const check = () => (s.events.includes('executed') ? done() : setImmediate(check));
    check();
  });
}

const PAY = { id: 'call_pay', name: 'send_payment', args: { orderId: 'o-1', cents: 1999 } };

describe('idempotent-tools/langgraph, end to end', () => {
  it('interrupt and resume: a sibling tool in the same ToolNode interrupts; the payment runs once', async () => {
    const s = setup();
    const approvals: unknown[] = [];
    const askHuman = tool(async (input: { question: string }) => {
      approvals.push(interrupt(input.question));
      return 'approved';
    }, { name: 'ask_human', description: 'ask', schema: z.object({ question: z.string() }) });
    const model = new ScriptedChatModel([PAY, { id: 'call_ask', name: 'ask_human', args: { question: 'ok?' } }]);
    const graph = graphOf(model, [paymentTool(s), askHuman], new MemorySaver());
    const config = { configurable: { thread_id: 'thread-interrupt' } };

    const first = await graph.invoke({ messages: [new HumanMessage('pay order o-1')] }, config);
    expect((first as { __interrupt__?: Array<{ value: unknown }> }).__interrupt__?.[0]?.value).toBe('ok?');
    await executed(s); // the sibling's interrupt does not wait for the payment to be recorded
    const resumed = await graph.invoke(new Command({ resume: 'yes' }), config);

    expect(approvals).toEqual(['yes']);
    expect(s.payments).toHaveLength(1); // ToolNode ran send_payment twice; the charge happened once
    expect(s.events).toEqual(['executed', 'replayed']);
    const toolMessages = resumed.messages.filter((m: BaseMessage) => m.getType() === 'tool');
    expect(toolMessages.map((m: BaseMessage) => m.content)).toContain(JSON.stringify({ receipt: 'r-o-1-1' }));
  });

  it('the same graph without the wrapper charges twice (the scenario is real)', async () => {
    let charges = 0;
    const bare = tool(async () => ++charges, { name: 'send_payment', description: 'charge', schema: z.object({ orderId: z.string(), cents: z.number() }) });
    const askHuman = tool(async () => interrupt('ok?'), { name: 'ask_human', description: 'ask', schema: z.object({ question: z.string() }) });
    const graph = graphOf(new ScriptedChatModel([PAY, { id: 'call_ask', name: 'ask_human', args: { question: 'ok?' } }]), [bare, askHuman], new MemorySaver());
    const config = { configurable: { thread_id: 't' } };
    await graph.invoke({ messages: [new HumanMessage('pay')] }, config);
    await graph.invoke(new Command({ resume: 'yes' }), config);
    expect(charges).toBe(2);
  });

  it('a node RetryPolicy re-runs the ToolNode after a sibling fails; the payment runs once', async () => {
    const s = setup();
    let flakyRuns = 0;
    const flaky = tool(async () => {
      flakyRuns++;
      await executed(s); // fail only once the payment has been recorded
      if (flakyRuns === 1) throw new Error('flaky upstream');
      return 'ok';
    }, { name: 'flaky', description: 'flaky', schema: z.object({}) });
    const model = new ScriptedChatModel([PAY, { id: 'call_flaky', name: 'flaky', args: {} }]);
    const graph = graphOf(model, [paymentTool(s), flaky], new MemorySaver(), { handleToolErrors: false, retry: true });

    const out = await graph.invoke({ messages: [new HumanMessage('pay')] }, { configurable: { thread_id: 'thread-retry' } });
    expect(flakyRuns).toBe(2);
    expect(s.payments).toHaveLength(1);
    expect(s.events).toEqual(['executed', 'replayed']);
    expect(out.messages.at(-1)?.content).toBe('done after 2 tool results');
  });

  it('resume after a crash: a new graph, new tools and a new store handle on the same checkpoints and file', async () => {
    const path = tempDb();
    const checkpointer = new MemorySaver();
    const config = { configurable: { thread_id: 'thread-crash' } };
    const before = setup(path);
    const crash = tool(async () => {
      await executed(before);
      throw new Error('process killed');
    }, { name: 'crash', description: 'crash', schema: z.object({}) });
    const model = new ScriptedChatModel([PAY, { id: 'call_crash', name: 'crash', args: {} }]);
    await expect(
      graphOf(model, [paymentTool(before), crash], checkpointer, { handleToolErrors: false }).invoke({ messages: [new HumanMessage('pay')] }, config),
    ).rejects.toThrow('process killed');
    expect(before.payments).toHaveLength(1);
    before.store.close();

    // "After the restart": everything rebuilt; only the checkpointer and the store file survive.
    const after = setup(path);
    const fine = tool(async () => 'ok', { name: 'crash', description: 'crash', schema: z.object({}) });
    const graph = graphOf(new ScriptedChatModel([]), [paymentTool(after), fine], checkpointer);
    expect((await graph.getState(config)).next).toEqual(['tools']);
    const out = await graph.invoke(null, config);
    expect(after.payments).toHaveLength(0);
    expect(after.events).toEqual(['replayed']);
    expect(out.messages.find((m: BaseMessage) => m.getType() === 'tool' && m.name === 'send_payment')?.content)
      .toBe(JSON.stringify({ receipt: 'r-o-1-1' }));
  });

  it('replay and fork from an earlier checkpoint: new task ids and steps, one payment', async () => {
    const s = setup();
    const model = new ScriptedChatModel([PAY]);
    const graph = graphOf(model, [paymentTool(s)], new MemorySaver());
    const config = { configurable: { thread_id: 'thread-fork' } };
    await graph.invoke({ messages: [new HumanMessage('pay')] }, config);
    expect(s.payments).toHaveLength(1);

    let beforeTools: Awaited<ReturnType<typeof graph.getState>> | undefined;
    for await (const snapshot of graph.getStateHistory(config)) {
      if (snapshot.next.includes('tools')) beforeTools = snapshot;
    }
    expect(beforeTools).toBeDefined();

    // Replay: run again from the checkpoint before the tools node.
    await graph.invoke(null, beforeTools!.config);
    // Fork: edit the state at that checkpoint (a new branch, one step later) and run it.
    const forked = await graph.updateState(beforeTools!.config, { messages: [] }, 'agent');
    const out = await graph.invoke(null, forked);

    expect(s.payments).toHaveLength(1);
    expect(s.events).toEqual(['executed', 'replayed', 'replayed']);
    // The framework called the tool three times with one tool call id, but other task ids
    // in the namespace, and (for the fork) another step: threadStepContext or the raw
    // checkpoint_ns would have keyed these calls apart and charged again.
    expect(s.seen.map((c) => c.toolCallId)).toEqual(['call_pay', 'call_pay', 'call_pay']);
    expect(new Set(s.seen.map((c) => c.ns)).size).toBe(3);
    expect(s.seen[2].step).not.toBe(s.seen[0].step);
    expect(new Set(s.seen.map((c) => stripTaskIds(c.ns as string)))).toEqual(new Set(['tools']));
    expect(out.messages.at(-1)?.content).toBe('done after 1 tool results');
  });

  it('the same tool with different arguments in the same step runs each', async () => {
    const s = setup();
    const model = new ScriptedChatModel([
      PAY,
      { id: 'call_pay_2', name: 'send_payment', args: { orderId: 'o-2', cents: 500 } },
    ]);
    const graph = graphOf(model, [paymentTool(s)], new MemorySaver());
    await graph.invoke({ messages: [new HumanMessage('pay both')] }, { configurable: { thread_id: 'thread-two' } });
    expect(s.payments.map((p) => p.orderId).sort()).toEqual(['o-1', 'o-2']);
    expect(s.events).toEqual(['executed', 'executed']);
  });

  it('the same tool call id in two threads runs in each (the thread is part of the key)', async () => {
    const s = setup();
    const graph = graphOf(new ScriptedChatModel([PAY]), [paymentTool(s)], new MemorySaver());
    await graph.invoke({ messages: [new HumanMessage('pay')] }, { configurable: { thread_id: 'a' } });
    await graph.invoke({ messages: [new HumanMessage('pay')] }, { configurable: { thread_id: 'b' } });
    expect(s.payments).toHaveLength(2);
  });

  it('outside a graph: a clear TypeError, and nothing runs', async () => {
    const s = setup();
    const pay = paymentTool(s);
    await expect(pay.invoke({ orderId: 'o-1', cents: 1 })).rejects.toThrow(/no tool call id.*second argument/s);
    await expect(pay.invoke({ ...PAY, type: 'tool_call' })).rejects.toThrow(/no thread_id.*configurable: \{ thread_id \}/s);
    expect(s.payments).toHaveLength(0);
    // With a scope, a tool call outside a graph works (e.g. a plain LangChain agent without a checkpointer).
    const scoped = tool(idempotentTool(async function ping(input: { n: number }) { return input.n; }, { store: s.store, scope: 'run-1' }),
      { name: 'ping', description: 'ping', schema: z.object({ n: z.number() }) });
    const msg = await scoped.invoke({ id: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', name: 'ping', args: { n: 3 }, type: 'tool_call' });
    expect(msg.content).toBe('3');
    // Outside a graph no AI message tells a call's turn: an id that a provider numbers (c1,
    // call_0) could be a later turn's call: refused, naming "key" (issue 36).
    await expect(scoped.invoke({ id: 'c1', name: 'ping', args: { n: 3 }, type: 'tool_call' })).rejects.toMatchObject({ code: 'CANNOT_TELL', option: 'key' });
  });

  it('annotate tells the agent a result was replayed', async () => {
    const s = setup();
    const outcomes: unknown[] = [];
    const fn = idempotentTool(async function charge(input: { n: number }) { return { charged: input.n }; }, {
      store: s.store,
      annotate: (result, o) => {
        outcomes.push({ replayed: o.replayed, toolCallId: o.toolCallId, framework: o.framework });
        return o.replayed ? { ...result, replayed: true } : result;
      },
    });
    const config = { configurable: { thread_id: 't', checkpoint_ns: 'tools:1b4e' }, toolCall: { id: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd' } };
    expect(await fn({ n: 1 }, config)).toEqual({ charged: 1 });
    expect(await fn({ n: 1 }, { ...config, configurable: { ...config.configurable, checkpoint_ns: 'tools:77aa' } })).toEqual({ charged: 1, replayed: true });
    expect(outcomes).toEqual([
      { replayed: false, toolCallId: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', framework: 'langgraph' },
      { replayed: true, toolCallId: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', framework: 'langgraph' },
    ]);
  });
});

describe('context helpers', () => {
  const config = {
    configurable: { thread_id: 'th', checkpoint_ns: 'agent:6f1d-aa|tools:0c3e-bb' },
    metadata: { langgraph_step: 4 },
    toolCall: { id: 'call_1', name: 'x', args: {} },
    state: { messages: [{ id: 'ai-3', tool_calls: [{ id: 'call_1', name: 'x', args: {} }] }] },
  };
  it('toolCallContext strips task ids from the namespace, and names the AI message that made the call', () => {
    expect(toolCallContext(config)).toEqual({ thread_id: 'th', checkpoint_ns: 'agent|tools', tool_call_id: 'call_1', message_id: 'ai-3' });
    // A numbered id with no AI message to tell its turn is refused, naming "key" (issue 36); a provider's unique id needs none.
    const { state: _state, ...withoutState } = config;
    expect(() => toolCallContext(withoutState)).toThrow(expect.objectContaining({ code: 'CANNOT_TELL', option: 'key' }));
    const unique = { ...withoutState, toolCall: { id: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', name: 'x', args: {} } };
    expect(toolCallContext(unique)).toEqual({ thread_id: 'th', checkpoint_ns: 'agent|tools', tool_call_id: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd' });
    expect(stripTaskIds('tools:abc')).toBe('tools');
    expect(stripTaskIds('')).toBe('');
  });
  it('threadStepContext reads the step from the metadata, or takes it', () => {
    expect(threadStepContext(config)).toEqual({ thread_id: 'th', step: 4 });
    expect(threadStepContext(config, 9)).toEqual({ thread_id: 'th', step: 9 });
    expect(() => threadStepContext({ configurable: { thread_id: 'th' } })).toThrow(/langgraph_step/);
  });
  it('missing pieces are TypeErrors that say what to do', () => {
    expect(() => toolCallContext(undefined as never)).toThrow(TypeError);
    expect(() => toolCallContext(undefined as never)).toThrow(/RunnableConfig.*outside a graph/);
    expect(() => toolCallContext({ toolCall: { id: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd' } })).toThrow(/thread_id/);
    expect(() => toolCallContext({ configurable: { thread_id: 't' } })).toThrow(/tool call id/);
  });
  it('plugs into idempotent() as a context', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let runs = 0;
    const f = lib.idempotent(function f(_input: { a: number }, _config: object) { return ++runs; }, {
      store,
      context: (_input, cfg) => toolCallContext(cfg as typeof config),
      payload: (input) => input,
    });
    expect(await f({ a: 1 }, config)).toBe(1);
    expect(await f({ a: 1 }, { ...config, configurable: { ...config.configurable, checkpoint_ns: 'agent:zz|tools:yy' } })).toBe(1);
  });
});
