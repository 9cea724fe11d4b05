// idempotent-tools/langchain: idempotentToolsMiddleware() in LangChain 1.x createAgent, the
// way users install it (one line in `middleware`), with LangChain's own humanInTheLoopMiddleware
// and toolRetryMiddleware, a scripted chat model, MemorySaver and real SqliteStore files.
// Each test counts the side effect.

import { createRequire } from 'node:module';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { stampRetryable } from '@langchain/core/errors';
import { tool } from '@langchain/core/tools';
import { Command, MemorySaver, interrupt } from '@langchain/langgraph';
import { createAgent, createMiddleware, humanInTheLoopMiddleware, toolRetryMiddleware } from 'langchain';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentToolsMiddleware }: typeof import('../dist/integrations/langchain.js') = require(`${ROOT}/dist/integrations/langchain.js`);
const fromLanggraph: typeof import('../dist/integrations/langgraph.js') = require(`${ROOT}/dist/integrations/langgraph.js`);
const { SqliteStore } = lib;

type Call = { id: string; name: string; args: Record<string, unknown> };

/** Turn n of the conversation (n AI messages so far) answers with `turns[n]`'s tool calls, then text. */
class ScriptedChatModel extends BaseChatModel {
  constructor(private readonly turns: Call[][]) {
    super({});
  }
  _llmType() {
    return 'scripted';
  }
  bindTools() {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const n = messages.filter((m) => m.getType() === 'ai').length;
    const calls = this.turns[n] ?? [];
    const message = new AIMessage({ id: `ai-${n}`, content: calls.length ? '' : 'done', tool_calls: calls.map((c) => ({ ...c, type: 'tool_call' as const })) });
    return { generations: [{ message, text: '' }] };
  }
}

const toolMessages = (out: { messages: BaseMessage[] }) => out.messages.filter((m) => m.getType() === 'tool') as ToolMessage[];
let threads = 0;
const thread = () => ({ configurable: { thread_id: `t-${++threads}` } });

/** A charge tool that counts its side effect; `fail` makes it throw after charging. */
function chargeTool(charges: unknown[], opts: { fail?: boolean } = {}) {
  return tool(
    async (input: { orderId: string; cents: number }) => {
      charges.push(input);
      if (opts.fail) throw new Error('gateway reset after the charge');
      return `charged ${input.cents} for ${input.orderId} (#${charges.length})`;
    },
    { name: 'charge', description: 'charge an order', schema: z.object({ orderId: z.string(), cents: z.number() }) },
  );
}

/** Re-runs the tools step from the checkpoint before it (a replay or fork: LangGraph runs the tools again). */
async function replayTools(agent: { graph: any }, config: { configurable: { thread_id: string } }) {
  for await (const snapshot of agent.graph.getStateHistory(config)) {
    if (snapshot.next.includes('tools')) return agent.graph.invoke(null, snapshot.config);
  }
  throw new Error('no checkpoint before the tools step');
}

describe('idempotentToolsMiddleware() in createAgent', () => {
  it('is exported from idempotent-tools/langchain and idempotent-tools/langgraph', () => {
    expect(fromLanggraph.idempotentToolsMiddleware).toBe(idempotentToolsMiddleware);
  });

  it('a replay of the tools step returns the stored ToolMessage; without the middleware the tool runs again', async () => {
    for (const guarded of [false, true]) {
      const charges: unknown[] = [];
      const agent = createAgent({
        model: new ScriptedChatModel([[{ id: 'call_1', name: 'charge', args: { orderId: 'o-1', cents: 500 } }]]),
        tools: [chargeTool(charges)],
        checkpointer: new MemorySaver(),
        middleware: guarded ? [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }) })] : [],
      });
      const config = thread();
      const first = await agent.invoke({ messages: [new HumanMessage('pay o-1')] }, config);
      const again = await replayTools(agent, config);
      expect(charges).toHaveLength(guarded ? 1 : 2);
      if (guarded) {
        const [a, b] = [toolMessages(first).at(-1)!, toolMessages(again).at(-1)!];
        expect(ToolMessage.isInstance(b)).toBe(true);
        expect({ content: b.content, tool_call_id: b.tool_call_id, name: b.name, status: b.status }).toEqual({
          content: a.content, tool_call_id: 'call_1', name: 'charge', status: a.status,
        });
      }
    }
  });

  it('a tool that returns a Command: a replay rebuilds the Command, and its ToolMessage lands in the state', async () => {
    const charges: unknown[] = [];
    const handoff = tool(
      async (input: { orderId: string }, runtime: { toolCallId: string }) => {
        charges.push(input);
        return new Command({ update: { messages: [new ToolMessage({ content: `handed off ${input.orderId}`, tool_call_id: runtime.toolCallId })] } });
      },
      { name: 'handoff', description: 'hand off', schema: z.object({ orderId: z.string() }) },
    );
    const agent = createAgent({
      model: new ScriptedChatModel([[{ id: 'call_h', name: 'handoff', args: { orderId: 'o-3' } }]]),
      tools: [handoff],
      checkpointer: new MemorySaver(),
      middleware: [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }) })],
    });
    const config = thread();
    await agent.invoke({ messages: [new HumanMessage('hand it off')] }, config);
    const again = await replayTools(agent, config);
    expect(charges).toHaveLength(1);
    const m = toolMessages(again).at(-1)!;
    expect([m.content, m.tool_call_id]).toEqual(['handed off o-3', 'call_h']);
  });

  it('a tool already wrapped with idempotentTool under the middleware: runs once, replays once', async () => {
    const charges: unknown[] = [];
    const store = new SqliteStore({ path: tempDb() });
    const wrapped = tool(
      fromLanggraph.idempotentTool(async function charge(input: { orderId: string; cents: number }) {
        charges.push(input);
        return `charged #${charges.length}`;
      }, { store }),
      { name: 'charge', description: 'charge', schema: z.object({ orderId: z.string(), cents: z.number() }) },
    );
    const agent = createAgent({
      model: new ScriptedChatModel([[{ id: 'call_1', name: 'charge', args: { orderId: 'o-1', cents: 5 } }]]),
      tools: [wrapped],
      checkpointer: new MemorySaver(),
      middleware: [idempotentToolsMiddleware({ store })],
    });
    const config = thread();
    const first = await agent.invoke({ messages: [new HumanMessage('pay')] }, config);
    const again = await replayTools(agent, config);
    expect(charges).toHaveLength(1);
    expect(toolMessages(again).at(-1)!.content).toBe(toolMessages(first).at(-1)!.content);
  });

  it('a throwing tool still reaches the model as the error ToolMessage it gets without middleware (invoke does not fail)', async () => {
    const contents: unknown[] = [];
    for (const middleware of [[], [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }) })]]) {
      const charges: unknown[] = [];
      const agent = createAgent({
        model: new ScriptedChatModel([[{ id: 'call_1', name: 'charge', args: { orderId: 'o-1', cents: 500 } }]]),
        tools: [chargeTool(charges, { fail: true })],
        checkpointer: new MemorySaver(),
        middleware: middleware as any[],
      });
      const out = await agent.invoke({ messages: [new HumanMessage('pay')] }, thread());
      const m = toolMessages(out).at(-1)!;
      expect(m.status).toBe('error');
      contents.push(m.content);
    }
    expect(contents[1]).toBe(contents[0]);
  });

  it("toolErrors: 'throw' lets a throwing tool fail invoke (LangChain's behaviour with any wrapToolCall middleware)", async () => {
    const agent = createAgent({
      model: new ScriptedChatModel([[{ id: 'call_1', name: 'charge', args: { orderId: 'o-1', cents: 500 } }]]),
      tools: [chargeTool([], { fail: true })],
      checkpointer: new MemorySaver(),
      middleware: [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }), toolErrors: 'throw' })],
    });
    await expect(agent.invoke({ messages: [new HumanMessage('pay')] }, thread())).rejects.toThrow(/gateway reset after the charge/);
  });

  it('interrupt inside a sibling tool (version v1, one tools node): on resume the charge is not run again', async () => {
    for (const guarded of [false, true]) {
      const charges: unknown[] = [];
      const asked: string[] = [];
      const confirm = tool(
        async (input: { question: string }) => {
          asked.push(input.question);
          return `answer: ${interrupt(input.question)}`;
        },
        { name: 'confirm', description: 'ask the user', schema: z.object({ question: z.string() }) },
      );
      const agent = createAgent({
        model: new ScriptedChatModel([[
          { id: 'call_c', name: 'charge', args: { orderId: 'o-1', cents: 500 } },
          { id: 'call_q', name: 'confirm', args: { question: 'ship today?' } },
        ]]),
        tools: [chargeTool(charges), confirm],
        checkpointer: new MemorySaver(),
        version: 'v1',
        middleware: guarded ? [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }) })] : [],
      });
      const config = thread();
      const first = await agent.invoke({ messages: [new HumanMessage('pay and ask')] }, config);
      expect(first.__interrupt__?.[0]?.value).toBe('ship today?');
      const done = await agent.invoke(new Command({ resume: 'yes' }), config);
      expect(asked).toEqual(['ship today?', 'ship today?']); // the interrupting tool ran again on resume (not recorded as done)
      expect(charges).toHaveLength(guarded ? 1 : 2);
      expect(toolMessages(done).map((m) => m.content)).toContain('answer: yes');
    }
  });

  it('an edit through humanInTheLoopMiddleware: the edited arguments run, once, also when the tools step is replayed', async () => {
    const charges: Array<{ cents: number }> = [];
    const agent = createAgent({
      model: new ScriptedChatModel([[{ id: 'call_1', name: 'charge', args: { orderId: 'o-1', cents: 100 } }]]),
      tools: [chargeTool(charges)],
      checkpointer: new MemorySaver(),
      middleware: [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }) }), humanInTheLoopMiddleware({ interruptOn: { charge: true } })],
    });
    const config = thread();
    const paused = await agent.invoke({ messages: [new HumanMessage('pay')] }, config);
    expect(paused.__interrupt__).toHaveLength(1);
    expect(charges).toEqual([]);
    const edit = { decisions: [{ type: 'edit', editedAction: { name: 'charge', args: { orderId: 'o-1', cents: 50 } } }] };
    const done = await agent.invoke(new Command({ resume: edit }), config);
    expect(charges).toEqual([{ orderId: 'o-1', cents: 50 }]);
    await replayTools(agent, config);
    expect(charges).toEqual([{ orderId: 'o-1', cents: 50 }]);
    expect(toolMessages(done).at(-1)!.tool_call_id).toBe('call_1');
  });

  for (const order of ['idempotency first', 'retry first'] as const) {
    it(`toolRetryMiddleware (${order}): a tool that charged and then threw runs once; the model gets an error message`, async () => {
      const charges: unknown[] = [];
      const retry = toolRetryMiddleware({ maxRetries: 2, initialDelayMs: 0, jitter: false });
      const guard = idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }) }) as any;
      const agent = createAgent({
        model: new ScriptedChatModel([[{ id: 'call_1', name: 'charge', args: { orderId: 'o-1', cents: 500 } }]]),
        tools: [chargeTool(charges, { fail: true })],
        checkpointer: new MemorySaver(),
        middleware: order === 'idempotency first' ? [guard, retry] : [retry, guard],
      });
      const out = await agent.invoke({ messages: [new HumanMessage('pay')] }, thread());
      expect(charges).toHaveLength(1);
      expect(toolMessages(out).at(-1)!.status).toBe('error');
    });
  }

  it('toolRetryMiddleware alone (the trap the middleware closes): the same tool runs three times', async () => {
    const charges: unknown[] = [];
    const agent = createAgent({
      model: new ScriptedChatModel([[{ id: 'call_1', name: 'charge', args: { orderId: 'o-1', cents: 500 } }]]),
      tools: [chargeTool(charges, { fail: true })],
      checkpointer: new MemorySaver(),
      middleware: [toolRetryMiddleware({ maxRetries: 2, initialDelayMs: 0, jitter: false })],
    });
    await agent.invoke({ messages: [new HumanMessage('pay')] }, thread());
    expect(charges).toHaveLength(3);
  });

  it('an attempt abandoned while the tool still runs: the retry joins it and gets its result (the tool runs once)', async () => {
    const charges: unknown[] = [];
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow = tool(
      async (input: { orderId: string }) => {
        started();
        await gate; // a slow payment provider
        charges.push(input);
        return `paid ${input.orderId}`;
      },
      { name: 'pay', description: 'pay', schema: z.object({ orderId: z.string() }) },
    );
    // A user's timeout middleware: gives up on the first attempt once it is running (a timeout, without a clock).
    let attempts = 0;
    const timeout = createMiddleware({
      name: 'timeout',
      wrapToolCall: async (request, handler) => {
        const attempt = handler(request);
        if (++attempts > 1) return attempt;
        attempt.catch(() => {});
        await running;
        throw stampRetryable(new Error('timed out'), true);
      },
    });
    const guard = idempotentToolsMiddleware({
      store: new SqliteStore({ path: tempDb() }),
      pollIntervalMs: 5,
      onEvent: (e) => e.type === 'in-flight' && release(), // the retry is waiting on the first run: let it finish
    }) as any;
    const agent = createAgent({
      model: new ScriptedChatModel([[{ id: 'call_1', name: 'pay', args: { orderId: 'o-9' } }]]),
      tools: [slow],
      checkpointer: new MemorySaver(),
      middleware: [toolRetryMiddleware({ maxRetries: 2, initialDelayMs: 0, jitter: false }), timeout, guard],
    });
    const out = await agent.invoke({ messages: [new HumanMessage('pay')] }, thread());
    expect(attempts).toBe(2);
    expect(charges).toHaveLength(1);
    expect(toolMessages(out).at(-1)!.content).toBe('paid o-9');
  });

  it('a business key: the model calls again under a new id, the tool runs once; other input under that key is an error the model sees', async () => {
    const charges: unknown[] = [];
    const agent = createAgent({
      model: new ScriptedChatModel([
        [{ id: 'call_1', name: 'charge', args: { orderId: 'o-7', cents: 500 } }],
        [{ id: 'call_2', name: 'charge', args: { orderId: 'o-7', cents: 500 } }], // "the model called it again"
        [{ id: 'call_3', name: 'charge', args: { orderId: 'o-7', cents: 900 } }],
      ]),
      tools: [chargeTool(charges)],
      checkpointer: new MemorySaver(),
      middleware: [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }), tools: { charge: { key: (input) => `order-${input.orderId}` } } })],
    });
    const out = await agent.invoke({ messages: [new HumanMessage('pay o-7')] }, thread());
    const [a, b, c] = toolMessages(out);
    expect(charges).toHaveLength(1);
    expect(b.content).toBe(a.content);
    expect(b.tool_call_id).toBe('call_2');
    expect(c.status).toBe('error');
    expect(c.content).toMatch(/KeyMismatchError.*tool "charge".*business key "order-o-7"/s);
  });

  it('our own errors are not retried by toolRetryMiddleware: a key mismatch fails after 1 attempt, not 3', async () => {
    const charges: unknown[] = [];
    const agent = createAgent({
      model: new ScriptedChatModel([
        [{ id: 'call_1', name: 'charge', args: { orderId: 'o-8', cents: 500 } }],
        [{ id: 'call_2', name: 'charge', args: { orderId: 'o-8', cents: 900 } }],
      ]),
      tools: [chargeTool(charges)],
      checkpointer: new MemorySaver(),
      middleware: [
        idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }), key: (input) => input.orderId }),
        toolRetryMiddleware({ maxRetries: 2, initialDelayMs: 0, jitter: false }),
      ],
    });
    const out = await agent.invoke({ messages: [new HumanMessage('pay')] }, thread());
    expect(charges).toHaveLength(1);
    expect(toolMessages(out).at(-1)!.content).toBe("Tool 'charge' failed after 1 attempt with KeyMismatchError");
  });

  it('read-only tools are not guarded (retried as before); a dynamically registered tool (no request.tool) is guarded', async () => {
    const charges: unknown[] = [];
    let lookups = 0;
    const lookup = tool(
      async () => {
        if (++lookups === 1) throw new Error('flaky');
        return 'found';
      },
      { name: 'lookup', description: 'lookup', schema: z.object({ q: z.string() }) },
    );
    const dynamic = chargeTool(charges);
    const provider = createMiddleware({
      name: 'provider',
      wrapToolCall: async (request, handler) => (request.tool ? handler(request) : handler({ ...request, tool: dynamic } as any)),
    });
    const agent = createAgent({
      model: new ScriptedChatModel([[
        { id: 'call_l', name: 'lookup', args: { q: 'x' } },
        { id: 'call_d', name: 'charge', args: { orderId: 'o-1', cents: 1 } },
      ]]),
      tools: [lookup],
      checkpointer: new MemorySaver(),
      middleware: [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }), readOnly: ['lookup'] }), provider, toolRetryMiddleware({ initialDelayMs: 0, jitter: false })],
    });
    const config = thread();
    const out = await agent.invoke({ messages: [new HumanMessage('go')] }, config);
    expect(lookups).toBe(2);
    expect(toolMessages(out).map((m) => m.content)).toEqual(expect.arrayContaining(['found', 'charged 1 for o-1 (#1)']));
    await replayTools(agent, config);
    expect(charges).toHaveLength(1);
  });

  it('configuration errors name the tool and the option: no thread id, a throwing scope', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const charges: unknown[] = [];
      const model = () => new ScriptedChatModel([[{ id: 'call_1', name: 'charge', args: { orderId: 'o-1', cents: 5 } }]]);
      const noThread = createAgent({ model: model(), tools: [chargeTool(charges)], middleware: [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }) })] });
      const a = toolMessages(await noThread.invoke({ messages: [new HumanMessage('pay')] })).at(-1)!;
      expect(a.content).toMatch(/tool "charge".*thread id.*configurable: \{ thread_id \}.*scope/s);
      const badScope = createAgent({
        model: model(),
        tools: [chargeTool(charges)],
        middleware: [idempotentToolsMiddleware({ store: new SqliteStore({ path: tempDb() }), scope: (_args, request: any) => request.runtime.context.chatId })],
      });
      const b = toolMessages(await badScope.invoke({ messages: [new HumanMessage('pay')] })).at(-1)!;
      expect(b.content).toMatch(/tool "charge": the "scope" option threw: Cannot read properties of undefined/);
      expect(charges).toEqual([]);
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      expect(warnings.map((w) => w.message).join('\n')).toMatch(/tool "charge": the "scope" option threw/);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('bad options fail at creation, naming the option', () => {
    expect(() => idempotentToolsMiddleware({ readOnly: 'lookup' as never })).toThrow(/option "readOnly" must be an array/);
    expect(() => idempotentToolsMiddleware({ tools: { charge: { key: 'order' as never } } })).toThrow(/option "key" must be a function/);
    expect(() => idempotentToolsMiddleware({ onDuplicate: 'raise' as never })).toThrow(/onDuplicate "raise" is refused/);
    expect(() => idempotentToolsMiddleware({ name: 'x' } as never)).toThrow(/option "name" is not taken/);
  });
});
