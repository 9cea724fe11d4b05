// idempotent-tools/langgraph in agents shaped the way users write them: real LangGraph.js
// graphs (ToolNode, a hand-written tools node, interrupt/resume, Command), a scripted
// chat model, real SqliteStore files. Each test counts the side effect.

import { createRequire } from 'node:module';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import { Annotation, Command, END, MemorySaver, MessagesAnnotation, START, StateGraph, interrupt } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTool }: typeof import('../dist/integrations/langgraph.js') = require(`${ROOT}/dist/integrations/langgraph.js`);
const { SqliteStore, step } = lib;

type Call = { id: string; name: string; args: Record<string, unknown> };

/** Answers every human turn with the scripted tool calls (the same ids every turn), anything else with text. */
class ScriptedChatModel extends BaseChatModel {
  constructor(private readonly toolCalls: Call[]) {
    super({});
  }
  _llmType() {
    return 'scripted';
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const last = messages[messages.length - 1];
    const message =
      last.getType() === 'human'
        ? new AIMessage({ content: '', tool_calls: this.toolCalls.map((c) => ({ ...c, type: 'tool_call' as const })) })
        : new AIMessage('done');
    return { generations: [{ message, text: '' }] };
  }
}

/** agent -> tools -> agent, with ToolNode (or the tools node the LangGraph quickstart writes by hand). */
function graphOf(model: ScriptedChatModel, tools: StructuredToolInterface[], options: { handWritten?: boolean } = {}) {
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  const handWritten = async (state: typeof MessagesAnnotation.State) => {
    const ai = state.messages.at(-1) as AIMessage;
    const out: BaseMessage[] = [];
    for (const call of ai.tool_calls ?? []) out.push(await byName[call.name].invoke(call));
    return { messages: out };
  };
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode('tools', options.handWritten ? handWritten : new ToolNode(tools))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? 'tools' : END))
    .addEdge('tools', 'agent')
    .compile({ checkpointer: new MemorySaver() });
}

const toolMessages = (out: { messages: BaseMessage[] }) => out.messages.filter((m) => m.getType() === 'tool') as ToolMessage[];

describe('interrupt inside a wrapped tool: confirm, act, confirm, act', () => {
  it('resumed twice, each act charges once (its step replays on the re-runs)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: string[] = [];
    const events: string[] = [];
    const transfer = tool(
      idempotentTool(async function transfer(input: { to: string; cents: number }) {
        if (interrupt(`send ${input.cents} to ${input.to}?`) !== 'yes') return 'cancelled';
        const first = await step('charge', async () => {
          charges.push(`charge ${input.cents}`);
          return `ch-${charges.length}`;
        });
        if (interrupt(`also the fee of 100?`) !== 'yes') return { first };
        const fee = await step('fee', async () => {
          charges.push('fee 100');
          return `ch-${charges.length}`;
        });
        return { first, fee };
      }, { store, onEvent: (e) => events.push(e.type) }),
      { name: 'transfer', description: 'transfer', schema: z.object({ to: z.string(), cents: z.number() }) },
    );
    const graph = graphOf(new ScriptedChatModel([{ id: 'call_t', name: 'transfer', args: { to: 'bob', cents: 500 } }]), [transfer]);
    const config = { configurable: { thread_id: 'thread-confirm' } };

    const first = await graph.invoke({ messages: [new HumanMessage('send bob 5')] }, config);
    expect(first.__interrupt__?.[0]?.value).toBe('send 500 to bob?');
    expect(charges).toEqual([]);
    const second = await graph.invoke(new Command({ resume: 'yes' }), config);
    expect(second.__interrupt__?.[0]?.value).toBe('also the fee of 100?');
    expect(charges).toEqual(['charge 500']);
    const done = await graph.invoke(new Command({ resume: 'yes' }), config);

    expect(charges).toEqual(['charge 500', 'fee 100']); // the first act did not run again on the second resume
    expect(toolMessages(done).map((m) => m.content)).toEqual([JSON.stringify({ first: 'ch-1', fee: 'ch-2' })]);
    expect(events.at(-1)).toBe('executed');
    expect(events.filter((e) => e === 'executed')).toHaveLength(1);
  });
});

describe('a re-run while the first run is still going', () => {
  it('waits for the first run past pollTimeoutMs, and the model sees its result, not an error', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    const events: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const pay = tool(
      idempotentTool(async function sendPayment(input: { orderId: string }) {
        await gate; // a slow payment provider
        payments.push(input);
        return { receipt: `r-${payments.length}` };
      }, {
        store,
        pollIntervalMs: 5,
        pollTimeoutMs: 20,
        onEvent: (e) => {
          events.push(e.type);
          // The waiter has gone past pollTimeoutMs once and kept waiting: let the payment finish.
          if (events.filter((t) => t === 'in-flight').length === 2) release();
        },
      }),
      { name: 'send_payment', description: 'pay', schema: z.object({ orderId: z.string() }) },
    );
    const ask = tool(async () => interrupt('ok?'), { name: 'ask_human', description: 'ask', schema: z.object({}) });
    const model = new ScriptedChatModel([
      { id: 'call_pay', name: 'send_payment', args: { orderId: 'o-1' } },
      { id: 'call_ask', name: 'ask_human', args: {} },
    ]);
    const graph = graphOf(model, [pay, ask]);
    const config = { configurable: { thread_id: 'thread-slow' } };

    await graph.invoke({ messages: [new HumanMessage('pay')] }, config); // interrupted while the payment is in flight
    const out = await graph.invoke(new Command({ resume: 'yes' }), config).finally(() => release());

    expect(payments).toHaveLength(1);
    const paid = toolMessages(out).find((m) => m.name === 'send_payment');
    expect(paid?.content).toBe(JSON.stringify({ receipt: 'r-1' }));
    expect(paid?.status).toBe('success');
  });
});

describe('a nested tool.invoke(args, config) inside a wrapped tool', () => {
  function shipping(store: InstanceType<typeof SqliteStore>, shipments: string[]) {
    const ship = tool(
      idempotentTool(async function ship(input: { sku: string }) {
        shipments.push(input.sku);
        return `shipment-${shipments.length}`;
      }, { store }),
      { name: 'ship', description: 'ship one item', schema: z.object({ sku: z.string() }) },
    );
    return ship;
  }

  it('two identical inner calls inside one outer call both run, and replay when the outer call re-runs', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const shipments: string[] = [];
    const ship = shipping(store, shipments);
    let outerRuns = 0;
    const order = tool(
      idempotentTool(async function fulfil(input: { sku: string }, config) {
        outerRuns++;
        const a = await ship.invoke({ sku: input.sku }, config); // the same config, passed on as LangChain does
        const b = await ship.invoke({ sku: input.sku }, config); // two of the same item
        if (outerRuns === 1) interrupt('confirm delivery?'); // the outer call re-runs on resume
        return [a, b].map((m) => (m as ToolMessage).content); // with a tool call in its config, LangChain returns a ToolMessage
      }, { store }),
      { name: 'fulfil', description: 'fulfil', schema: z.object({ sku: z.string() }) },
    );
    const graph = graphOf(new ScriptedChatModel([{ id: 'call_f', name: 'fulfil', args: { sku: 'mug' } }]), [order, ship]);
    const config = { configurable: { thread_id: 'thread-nested' } };
    await graph.invoke({ messages: [new HumanMessage('two mugs')] }, config);
    const out = await graph.invoke(new Command({ resume: 'yes' }), config);

    expect(shipments).toEqual(['mug', 'mug']);
    expect(outerRuns).toBe(2);
    expect(toolMessages(out).map((m) => m.content)).toEqual([JSON.stringify(['shipment-1', 'shipment-2'])]);
  });

  it('called without a config (tool.invoke(args)) inside a wrapped tool: each call runs once, as a step', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const shipments: string[] = [];
    const ship = shipping(store, shipments);
    let outerRuns = 0;
    const order = tool(
      idempotentTool(async function fulfil(input: { sku: string }) {
        outerRuns++;
        const a = await ship.invoke({ sku: input.sku });
        const b = await ship.invoke({ sku: input.sku });
        if (outerRuns === 1) interrupt('confirm delivery?');
        return [a, b];
      }, { store }),
      { name: 'fulfil', description: 'fulfil', schema: z.object({ sku: z.string() }) },
    );
    const graph = graphOf(new ScriptedChatModel([{ id: 'call_f', name: 'fulfil', args: { sku: 'mug' } }]), [order, ship]);
    const config = { configurable: { thread_id: 'thread-nested-bare' } };
    await graph.invoke({ messages: [new HumanMessage('two mugs')] }, config);
    const out = await graph.invoke(new Command({ resume: 'yes' }), config);
    expect(shipments).toEqual(['mug', 'mug']);
    expect(toolMessages(out).map((m) => m.content)).toEqual([JSON.stringify(['shipment-1', 'shipment-2'])]);
  });

  it('inside a tool that is not wrapped: a clear TypeError (and nothing ships)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const shipments: string[] = [];
    const ship = shipping(store, shipments);
    const bare = tool(async (input: { sku: string; qty: number }, config) => ship.invoke({ sku: input.sku }, config), {
      name: 'fulfil', description: 'fulfil', schema: z.object({ sku: z.string(), qty: z.number() }),
    });
    const out = await graphOf(new ScriptedChatModel([{ id: 'call_f', name: 'fulfil', args: { sku: 'cup', qty: 1 } }]), [bare, ship])
      .invoke({ messages: [new HumanMessage('a cup')] }, { configurable: { thread_id: 't' } });
    expect(String(toolMessages(out)[0].content)).toMatch(/invoked with another tool call's context \(call_f\).*tool_call/s);
    expect(shipments).toEqual([]);
  });
});

describe('streamed (async generator) tools', () => {
  it('the body runs inside its record: it charges once, and its return value is the result', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: string[] = [];
    const pay = tool(
      idempotentTool(async function* streamPayment(input: { orderId: string }) {
        yield { progress: 'authorizing' };
        charges.push(input.orderId);
        return { receipt: `r-${charges.length}` };
      }, { store }),
      { name: 'send_payment', description: 'pay', schema: z.object({ orderId: z.string() }) },
    );
    const ask = tool(async () => interrupt('ok?'), { name: 'ask_human', description: 'ask', schema: z.object({}) });
    const graph = graphOf(new ScriptedChatModel([{ id: 'call_pay', name: 'send_payment', args: { orderId: 'o-1' } }, { id: 'call_ask', name: 'ask_human', args: {} }]), [pay, ask]);
    const config = { configurable: { thread_id: 'thread-gen' } };
    await graph.invoke({ messages: [new HumanMessage('pay')] }, config);
    const out = await graph.invoke(new Command({ resume: 'yes' }), config);
    expect(charges).toEqual(['o-1']);
    expect(toolMessages(out).find((m) => m.name === 'send_payment')?.content).toBe(JSON.stringify({ receipt: 'r-1' }));
  });
});

describe('a tool that returns a Command', () => {
  it('replayed, it is a Command again: its update and goto still apply', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: string[] = [];
    const State = Annotation.Root({ ...MessagesAnnotation.spec, paid: Annotation<string | undefined>() });
    const pay = tool(
      idempotentTool(async function sendPayment(input: { orderId: string }, config) {
        charges.push(input.orderId);
        return new Command({
          update: {
            paid: `r-${charges.length}`,
            messages: [new ToolMessage({ content: 'paid', tool_call_id: String(config.toolCall?.id), name: 'send_payment' })],
          },
          goto: 'receipt',
        });
      }, { store }),
      { name: 'send_payment', description: 'pay', schema: z.object({ orderId: z.string() }) },
    );
    const ask = tool(async () => interrupt('ok?'), { name: 'ask_human', description: 'ask', schema: z.object({}) });
    const receipts: unknown[] = [];
    const model = new ScriptedChatModel([{ id: 'call_pay', name: 'send_payment', args: { orderId: 'o-1' } }, { id: 'call_ask', name: 'ask_human', args: {} }]);
    const graph = new StateGraph(State)
      .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode('tools', new ToolNode([pay, ask]), { ends: ['receipt', 'agent'] })
      .addNode('receipt', async (state) => {
        receipts.push(state.paid);
        return {};
      })
      .addEdge(START, 'agent')
      .addConditionalEdges('agent', (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? 'tools' : END))
      .addEdge('receipt', END)
      .compile({ checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: 'thread-command' } };
    await graph.invoke({ messages: [new HumanMessage('pay')] }, config); // the sibling interrupts; the payment's Command is stored
    const out = await graph.invoke(new Command({ resume: 'yes' }), config); // ToolNode re-runs the payment: replayed

    expect(charges).toEqual(['o-1']);
    expect(out.paid).toBe('r-1');
    expect(receipts).toEqual(['r-1']);
    const paid = toolMessages(out).find((m) => m.name === 'send_payment')!;
    expect(paid).toBeInstanceOf(ToolMessage);
    expect(paid.content).toBe('paid');
    expect(paid.tool_call_id).toBe('call_pay');
  });
});

describe('a handoff: a tool in a subgraph returns Command({ graph: Command.PARENT, goto })', () => {
  it('replayed, the handoff still goes to the parent graph\'s node', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const handoffs: string[] = [];
    const transfer = tool(
      idempotentTool(async function transferToBilling(input: { reason: string }, config) {
        handoffs.push(input.reason);
        return new Command({
          graph: Command.PARENT,
          goto: 'billing',
          update: { messages: [new ToolMessage({ content: 'handed off', tool_call_id: String(config.toolCall?.id), name: 'transfer_to_billing' })] },
        });
      }, { store }),
      { name: 'transfer_to_billing', description: 'hand off', schema: z.object({ reason: z.string() }) },
    );
    const ask = tool(async () => interrupt('ok?'), { name: 'ask_human', description: 'ask', schema: z.object({}) });
    const model = new ScriptedChatModel([{ id: 'call_t', name: 'transfer_to_billing', args: { reason: 'refund' } }, { id: 'call_ask', name: 'ask_human', args: {} }]);
    const support = new StateGraph(MessagesAnnotation)
      .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode('tools', new ToolNode([transfer, ask]))
      .addEdge(START, 'agent')
      .addEdge('agent', 'tools')
      .addEdge('tools', END)
      .compile();
    const billingRuns: number[] = [];
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('support', support, { ends: ['billing'] })
      .addNode('billing', async () => {
        billingRuns.push(1);
        return { messages: [new AIMessage('billing here')] };
      })
      .addEdge(START, 'support')
      .addEdge('billing', END)
      .compile({ checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: 'thread-handoff' } };
    await graph.invoke({ messages: [new HumanMessage('I want a refund')] }, config); // the sibling interrupts
    const out = await graph.invoke(new Command({ resume: 'yes' }), config); // the handoff is replayed

    expect(handoffs).toEqual(['refund']);
    expect(billingRuns).toEqual([1]);
    expect(out.messages.at(-1)?.content).toBe('billing here');
  });
});

describe('a tool that returns a ToolMessage', () => {
  it('replayed, it is a ToolMessage again (content, artifact and status kept), not JSON text', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: string[] = [];
    const pay = tool(
      idempotentTool(async function sendPayment(input: { orderId: string }, config) {
        charges.push(input.orderId);
        return new ToolMessage({ content: 'paid', artifact: { receipt: `r-${charges.length}` }, tool_call_id: String(config.toolCall?.id), name: 'send_payment' });
      }, { store }),
      { name: 'send_payment', description: 'pay', schema: z.object({ orderId: z.string() }) },
    );
    const ask = tool(async () => interrupt('ok?'), { name: 'ask_human', description: 'ask', schema: z.object({}) });
    const graph = graphOf(new ScriptedChatModel([{ id: 'call_pay', name: 'send_payment', args: { orderId: 'o-1' } }, { id: 'call_ask', name: 'ask_human', args: {} }]), [pay, ask]);
    const config = { configurable: { thread_id: 'thread-toolmessage' } };
    await graph.invoke({ messages: [new HumanMessage('pay')] }, config);
    const out = await graph.invoke(new Command({ resume: 'yes' }), config);
    expect(charges).toEqual(['o-1']);
    const paid = toolMessages(out).find((m) => m.name === 'send_payment')!;
    expect(paid.content).toBe('paid');
    expect(paid.artifact).toEqual({ receipt: 'r-1' });
  });
});

describe('providers that restart tool call ids at call_0 every turn', () => {
  for (const handWritten of [true, false]) {
    it(`turn 7's identical call runs (${handWritten ? 'a hand-written tools node' : 'ToolNode with Send'})`, async () => {
      const store = new SqliteStore({ path: tempDb() });
      const sent: string[] = [];
      const sendEmail = tool(
        idempotentTool(async function sendEmail(input: { to: string; text: string }) {
          sent.push(`${input.to}: ${input.text}`);
          return `sent ${sent.length}`;
        }, { store }),
        { name: 'send_email', description: 'email', schema: z.object({ to: z.string(), text: z.string() }) },
      );
      const model = new ScriptedChatModel([{ id: 'call_0', name: 'send_email', args: { to: 'bob', text: 'hi' } }]);
      let graph;
      if (handWritten) {
        graph = graphOf(model, [sendEmail], { handWritten: true });
      } else {
        // ToolNode skips a call whose id already has a ToolMessage in the thread; fanned out
        // with Send (one ToolNode run per call) it runs every call it is given.
        const { Send } = await import('@langchain/langgraph');
        graph = new StateGraph(MessagesAnnotation)
          .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
          .addNode('tools', new ToolNode([sendEmail]))
          .addEdge(START, 'agent')
          .addConditionalEdges('agent', (state) => {
            const calls = (state.messages.at(-1) as AIMessage).tool_calls ?? [];
            return calls.length ? calls.map((c) => new Send('tools', { ...state, lg_tool_call: c })) : END;
          })
          .addEdge('tools', 'agent')
          .compile({ checkpointer: new MemorySaver() });
      }
      const config = { configurable: { thread_id: 'thread-reused-ids' } };
      for (let turn = 1; turn <= 7; turn++) await graph.invoke({ messages: [new HumanMessage(`turn ${turn}`)] }, config);
      expect(sent).toHaveLength(7);
    });
  }
});

describe('configuration errors reach the developer', () => {
  it('no checkpointer: the model gets the TypeError, and the developer a warning, once per tool', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      let runs = 0;
      const pay = tool(idempotentTool(async function payNoCheckpointer() { return ++runs; }, { store }), { name: 'pay_no_checkpointer', description: 'pay', schema: z.object({}) });
      const model = new ScriptedChatModel([{ id: 'call_0', name: 'pay_no_checkpointer', args: {} }]);
      const graph = new StateGraph(MessagesAnnotation)
        .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
        .addNode('tools', new ToolNode([pay]))
        .addEdge(START, 'agent')
        .addConditionalEdges('agent', (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? 'tools' : END))
        .addEdge('tools', 'agent')
        .compile(); // no checkpointer
      await graph.invoke({ messages: [new HumanMessage('pay')] });
      const out = await graph.invoke({ messages: [new HumanMessage('pay')] });
      expect(runs).toBe(0);
      expect(String(toolMessages(out)[0].content)).toMatch(/no thread_id/);
      await new Promise<void>((r) => setImmediate(r)); // warnings are emitted on the next tick
      const ours = warnings.filter((w) => w.name === 'IdempotentToolsWarning');
      expect(ours).toHaveLength(1);
      expect(ours[0].message).toMatch(/no thread_id.*checkpointer/s);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('an input that is not JSON (a zod transform to BigInt) points at "payload"; "context" is refused', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let runs = 0;
    const pay = tool(idempotentTool(async function payBig() { return ++runs; }, { store }), {
      name: 'pay_big', description: 'pay', schema: z.object({ cents: z.string().transform((s) => BigInt(s)) }),
    });
    const out = await graphOf(new ScriptedChatModel([{ id: 'call_0', name: 'pay_big', args: { cents: '12' } }]), [pay])
      .invoke({ messages: [new HumanMessage('pay')] }, { configurable: { thread_id: 't' } });
    const text = String(toolMessages(out)[0].content);
    expect(text).toMatch(/payload\.cents is a BigInt.*"payload" option/s);
    expect(text).not.toMatch(/withKey/);
    expect(runs).toBe(0);
    expect(() => idempotentTool(async function k() {}, { context: () => 'k' } as never)).toThrow(/option "context" is not taken here.*"payload"/s);
  });
});

describe('a schema that transforms the input', () => {
  it('the tool call is still this tool\'s own (same name, same shape): a re-run replays', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const sent: string[] = [];
    const email = tool(
      idempotentTool(async function send_email(input: { to: string }) {
        sent.push(input.to);
        return 'sent';
      }, { store }),
      { name: 'send_email', description: 'email', schema: z.object({ to: z.string().transform((s) => s.toLowerCase()) }) },
    );
    const ask = tool(async () => interrupt('ok?'), { name: 'ask_human', description: 'ask', schema: z.object({}) });
    const graph = graphOf(new ScriptedChatModel([{ id: 'call_mail', name: 'send_email', args: { to: 'Bob@Example.com' } }, { id: 'call_ask', name: 'ask_human', args: {} }]), [email, ask]);
    const config = { configurable: { thread_id: 'thread-transform' } };
    await graph.invoke({ messages: [new HumanMessage('mail bob')] }, config);
    const out = await graph.invoke(new Command({ resume: 'yes' }), config);
    expect(sent).toEqual(['bob@example.com']);
    expect(toolMessages(out).find((m) => m.name === 'send_email')?.content).toBe('sent');
  });
});

describe('anonymous tool functions', () => {
  it('tool(idempotentTool(async (input) => ...), { name }) takes the name from the tool call', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: unknown[] = [];
    const pay = tool(
      idempotentTool(async (input: { orderId: string }) => {
        charges.push(input);
        return 'ok';
      }, { store }),
      { name: 'send_payment', description: 'pay', schema: z.object({ orderId: z.string() }) },
    );
    const ask = tool(async () => interrupt('ok?'), { name: 'ask_human', description: 'ask', schema: z.object({}) });
    const graph = graphOf(new ScriptedChatModel([{ id: 'call_pay', name: 'send_payment', args: { orderId: 'o-1' } }, { id: 'call_ask', name: 'ask_human', args: {} }]), [pay, ask]);
    const config = { configurable: { thread_id: 'thread-anon' } };
    await graph.invoke({ messages: [new HumanMessage('pay')] }, config);
    await graph.invoke(new Command({ resume: 'yes' }), config);
    expect(charges).toHaveLength(1);
    expect((await store.listRecords()).map((r) => r.name)).toEqual(['send_payment']);
  });
});

describe('a business key (the "key" option) on idempotentTool', () => {
  it('the model calls again in a later turn under a new id: the tool runs once, and the ToolMessage answers the new id', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    const pay = tool(
      idempotentTool(async function sendPayment(input: { orderId: string }) {
        payments.push(input);
        return { receipt: `r-${payments.length}` };
      }, { store, key: (input) => `order-${input.orderId}` }),
      { name: 'send_payment', description: 'pay', schema: z.object({ orderId: z.string() }) },
    );
    const config = { configurable: { thread_id: 'thread-business-key' } };
    const first = await graphOf(new ScriptedChatModel([{ id: 'call_1', name: 'send_payment', args: { orderId: 'o-1' } }]), [pay])
      .invoke({ messages: [new HumanMessage('pay')] }, config);
    // Another turn, another graph run: the model calls it again, under another id.
    const again = await graphOf(new ScriptedChatModel([{ id: 'call_2', name: 'send_payment', args: { orderId: 'o-1' } }]), [pay])
      .invoke({ messages: [...first.messages, new HumanMessage('did it go through? pay it')] }, { configurable: { thread_id: 'thread-business-key' } });
    expect(payments).toHaveLength(1);
    const last = toolMessages(again).at(-1)!;
    expect(last.tool_call_id).toBe('call_2');
    expect(last.content).toBe(JSON.stringify({ receipt: 'r-1' }));
    const other = await graphOf(new ScriptedChatModel([{ id: 'call_3', name: 'send_payment', args: { orderId: 'o-2' } }]), [pay])
      .invoke({ messages: [new HumanMessage('pay o-2')] }, { configurable: { thread_id: 'another-thread' } });
    expect(toolMessages(other).at(-1)!.content).toBe(JSON.stringify({ receipt: 'r-2' }));
  });
});

describe('configuration errors of idempotentTool name the tool and the option', () => {
  it('a throwing scope: the model and the developer are told which tool and which option', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      let runs = 0;
      const pay = tool(
        idempotentTool(async function sendPayment() {
          return ++runs;
        }, { store: new SqliteStore({ path: tempDb() }), scope: (_input, config: any) => config.configurable.tenant.id }),
        { name: 'send_payment', description: 'pay', schema: z.object({ orderId: z.string() }) },
      );
      const out = await graphOf(new ScriptedChatModel([{ id: 'call_0', name: 'send_payment', args: { orderId: 'o' } }]), [pay])
        .invoke({ messages: [new HumanMessage('pay')] }, { configurable: { thread_id: 't-scope' } });
      expect(String(toolMessages(out)[0].content)).toMatch(/tool "send_payment": the "scope" option threw: Cannot read properties of undefined \(reading 'id'\)/);
      expect(runs).toBe(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((w) => w.message).join('\n')).toMatch(/idempotent-tools\/langgraph: tool "send_payment": the "scope" option threw/);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('a node timeout (LangGraph 1.7 `timeout` with a RetryPolicy) while the tool still runs', () => {
  it('the retried attempt joins the first run and gets its result: the tool runs once', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    let starts = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const pay = tool(
      idempotentTool(async function sendPayment(input: { orderId: string }) {
        starts++;
        await gate; // slower than the node's timeout; it does not stop when the attempt is abandoned
        payments.push(input);
        return { receipt: `r-${payments.length}` };
      }, { store, pollIntervalMs: 5, onEvent: (e) => e.type === 'in-flight' && release() }),
      { name: 'send_payment', description: 'pay', schema: z.object({ orderId: z.string() }) },
    );
    const model = new ScriptedChatModel([{ id: 'call_1', name: 'send_payment', args: { orderId: 'o-1' } }]);
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode('tools', new ToolNode([pay]), { timeout: 20, retryPolicy: { maxAttempts: 10, initialInterval: 1, jitter: false } })
      .addEdge(START, 'agent')
      .addConditionalEdges('agent', (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? 'tools' : END))
      .addEdge('tools', 'agent')
      .compile({ checkpointer: new MemorySaver() });
    const out = await graph.invoke({ messages: [new HumanMessage('pay')] }, { configurable: { thread_id: 't-node-timeout' } });
    expect(starts).toBe(1);
    expect(payments).toHaveLength(1);
    expect(toolMessages(out).at(-1)!.content).toBe(JSON.stringify({ receipt: 'r-1' }));
  });
});
