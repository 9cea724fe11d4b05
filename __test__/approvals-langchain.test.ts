// Approvals in LangChain 1.x createAgent, as users install them: humanInTheLoopMiddleware
// decides, idempotentToolsMiddleware guards (it reads HITL's decisions from the agent's
// checkpoints). A scripted chat model whose message and call ids repeat (ai-0, call_0) when
// a turn is run again, MemorySaver, real SqliteStore files. Each test counts the charges.

import { createRequire } from 'node:module';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage, type ToolMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { Command, MemorySaver } from '@langchain/langgraph';
import { createAgent, humanInTheLoopMiddleware } from 'langchain';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentToolsMiddleware }: typeof import('../dist/integrations/langchain.js') = require(`${ROOT}/dist/integrations/langchain.js`);
const { idempotentTool }: typeof import('../dist/integrations/langgraph.js') = require(`${ROOT}/dist/integrations/langgraph.js`);
const { SqliteStore, ApprovalMismatchError } = lib;

type Call = { id: string; name: string; args: Record<string, unknown> };

/** Turn n (n AI messages so far) answers with `turns[n]`'s calls (message id ai-n), then text. */
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
const decide = {
  approve: { decisions: [{ type: 'approve' }] },
  reject: { decisions: [{ type: 'reject', message: 'not this month' }] },
  edit: (cents: number) => ({ decisions: [{ type: 'edit', editedAction: { name: 'charge', args: { orderId: 'o-1', cents } } }] }),
};

function setup(turns: Call[][], opts: { guarded?: boolean | 'per-tool' } = {}) {
  const charges: Array<{ cents: number }> = [];
  const events: Array<{ type: string; decision?: string; toolCallId?: string; error?: unknown }> = [];
  const store = new SqliteStore({ path: tempDb() });
  const run = async (input: { orderId: string; cents: number }) => {
    charges.push(input);
    return `charged ${input.cents} (#${charges.length})`;
  };
  const charge = tool(opts.guarded === 'per-tool' ? idempotentTool(async function charge(input: { orderId: string; cents: number }) { return run(input); }, { store, onEvent: (e) => events.push(e) }) : run, {
    name: 'charge',
    description: 'charge an order',
    schema: z.object({ orderId: z.string(), cents: z.number() }),
  });
  const agent = createAgent({
    model: new ScriptedChatModel(turns),
    tools: [charge],
    checkpointer: new MemorySaver(),
    middleware: [
      ...(opts.guarded === true || opts.guarded === undefined ? [idempotentToolsMiddleware({ store, onEvent: (e) => events.push(e) })] : []),
      humanInTheLoopMiddleware({ interruptOn: { charge: true } }),
    ],
  });
  const config = { configurable: { thread_id: `t-${++threads}` } };
  /** Runs the turn again from the checkpoint before its model call (a resubmitted turn: the model answers alike). */
  const rerunTurn = async () => {
    let before: { config: unknown } | undefined;
    for await (const s of agent.graph.getStateHistory(config)) if (s.next.includes('model_request') && s.values.messages.length === 1) before = s;
    const paused = await agent.graph.invoke(null, before!.config as never);
    expect(paused.__interrupt__).toHaveLength(1);
  };
  const decisions = async () => (await store.listRecords()).filter((r) => r.name.startsWith('approval:'));
  return { agent, config, charges, events, store, rerunTurn, decisions };
}

const payTurn: Call[] = [{ id: 'call_0', name: 'charge', args: { orderId: 'o-1', cents: 100 } }];

describe('approvals in createAgent (humanInTheLoopMiddleware decides, idempotentToolsMiddleware guards)', () => {
  it('an approval answered twice, in turn and at once: the tool runs once; the approval is recorded once, for the turn', async () => {
    const { agent, config, charges, events, decisions } = setup([payTurn]);
    await agent.invoke({ messages: [new HumanMessage('pay')] }, config);
    const [a, b] = await Promise.all([agent.invoke(new Command({ resume: decide.approve }), config), agent.invoke(new Command({ resume: decide.approve }), config)]);
    const c = await agent.invoke(new Command({ resume: decide.approve }), config);
    expect(charges).toEqual([{ orderId: 'o-1', cents: 100 }]);
    for (const out of [a, b, c]) expect(toolMessages(out).at(-1)!.content).toBe('charged 100 (#1)');
    const [decision] = await decisions();
    expect(decision).toEqual(expect.objectContaining({ name: 'approval:approved:charge', status: 'completed' }));
    expect(decision.result).toEqual(expect.objectContaining({ decision: 'approve', turn: 'ai-0', toolCallId: 'call_0', scope: config.configurable.thread_id, source: 'langchain' }));
    expect(events.filter((e) => e.type === 'approved')).toEqual([expect.objectContaining({ decision: 'approve', toolCallId: 'call_0' })]);
  });

  it('a resubmitted approved history (the tools step replayed from its checkpoint): the tool runs once', async () => {
    const { agent, config, charges } = setup([payTurn]);
    await agent.invoke({ messages: [new HumanMessage('pay')] }, config);
    await agent.invoke(new Command({ resume: decide.approve }), config);
    for await (const s of agent.graph.getStateHistory(config)) {
      if (s.next.includes('tools')) {
        await agent.graph.invoke(null, s.config);
        break;
      }
    }
    expect(charges).toHaveLength(1);
  });

  it('an edit runs the edited arguments once; the turn run again and approved as the model asked does not run, and says why', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const { agent, config, charges, events, rerunTurn, decisions } = setup([payTurn]);
      await agent.invoke({ messages: [new HumanMessage('pay')] }, config);
      await agent.invoke(new Command({ resume: decide.edit(50) }), config);
      expect(charges).toEqual([{ orderId: 'o-1', cents: 50 }]);
      expect((await decisions()).map((r) => r.name)).toEqual(['approval:edited:charge']);

      await rerunTurn();
      const out = await agent.invoke(new Command({ resume: decide.approve }), config);
      expect(charges).toEqual([{ orderId: 'o-1', cents: 50 }]);
      const m = toolMessages(out).at(-1)!;
      expect(m.status).toBe('error');
      expect(m.content).toMatch(/tool "charge" call call_0 is approved for other arguments than these \(edited\), so it did not run/);
      const mismatch = events.find((e) => e.type === 'approval-mismatch');
      expect(mismatch?.error).toBeInstanceOf(ApprovalMismatchError);
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      expect(warnings.map((w) => w.message)).toContainEqual(expect.stringMatching(/is approved for other arguments/));
    } finally {
      process.off('warning', onWarning);
    }
  });

  for (const guarded of [false, true]) {
    it(`a rejection, then the same turn resubmitted and approved: ${guarded ? 'the tool never runs (the rejection was recorded)' : 'without the middleware, it runs'}`, async () => {
      const { agent, config, charges, rerunTurn, decisions } = setup([payTurn], { guarded });
      await agent.invoke({ messages: [new HumanMessage('pay')] }, config);
      const rejected = await agent.invoke(new Command({ resume: decide.reject }), config);
      expect(toolMessages(rejected).at(-1)!.content).toBe('not this month');
      await agent.invoke(new Command({ resume: decide.approve }), config); // answered again: LangGraph has nothing to resume
      await rerunTurn();
      const out = await agent.invoke(new Command({ resume: decide.approve }), config);
      expect(charges).toHaveLength(guarded ? 0 : 1);
      if (guarded) {
        const m = toolMessages(out).at(-1)!;
        expect([m.content, m.status, m.tool_call_id]).toEqual(['not this month', 'error', 'call_0']);
        const [decision] = await decisions();
        expect(decision.name).toBe('approval:rejected:charge');
        expect(decision.result).toEqual(expect.objectContaining({ decision: 'reject', reason: 'not this month', turn: 'ai-0' }));
      }
    });
  }

  it('call_0 reused in the next turn after an approval: that call needs (and gets) its own decision', async () => {
    for (const second of ['approve', 'reject'] as const) {
      const { agent, config, charges, decisions } = setup([payTurn, payTurn]);
      await agent.invoke({ messages: [new HumanMessage('pay twice')] }, config);
      const paused = await agent.invoke(new Command({ resume: decide.approve }), config);
      expect(paused.__interrupt__).toHaveLength(1); // turn 2 (ai-1) asks again, for call_0 again
      await agent.invoke(new Command({ resume: decide[second] }), config);
      expect(charges).toHaveLength(second === 'approve' ? 2 : 1);
      const turns = (await decisions()).map((r) => `${r.name} ${(r.result as { turn: string }).turn}`).sort();
      expect(turns).toEqual(['approval:approved:charge ai-0', `approval:${second === 'approve' ? 'approved' : 'rejected'}:charge ai-1`]);
    }
  });

  it('a tool wrapped with idempotentTool (no middleware) reads the decisions too: an edit, then the turn run again and approved as asked, does not run', async () => {
    const { agent, config, charges, events, rerunTurn } = setup([payTurn], { guarded: 'per-tool' });
    await agent.invoke({ messages: [new HumanMessage('pay')] }, config);
    await agent.invoke(new Command({ resume: decide.edit(50) }), config);
    await rerunTurn();
    const out = await agent.invoke(new Command({ resume: decide.approve }), config);
    expect(charges).toEqual([{ orderId: 'o-1', cents: 50 }]);
    const m = toolMessages(out).at(-1)!;
    expect([m.status, m.tool_call_id]).toEqual(['error', 'call_0']);
    expect(m.content).toMatch(/is approved for other arguments than these \(edited\)/);
    expect(events.map((e) => e.type)).toContain('approval-mismatch');
  });
});
