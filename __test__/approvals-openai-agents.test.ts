// Approvals in OpenAI Agents JS (@openai/agents-core 0.14 in npm test; the current
// @openai/agents runs in e2e/node22/openai-agents.mjs): tools with needsApproval,
// idempotentTools over the agent's tools, RunState approve/reject, a saved run resumed from
// its string, a scripted Model (call ids repeat every turn; output item ids do not), real
// SqliteStore files.

import { createRequire } from 'node:module';

import { Agent, type AgentInputItem, type Model, type ModelRequest, type ModelResponse, RunState, Runner, Usage, setTracingDisabled, tool } from '@openai/agents-core';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTools }: typeof import('../dist/integrations/openai-agents.js') = require(`${ROOT}/dist/integrations/openai-agents.js`);
const { SqliteStore, recordApproval, ApprovalMismatchError } = lib;

setTracingDisabled(true);

/** Calls `charge` with call id call_0 on every user turn (output item ids fc_1, fc_2, ...), then answers in text. */
class ScriptedModel implements Model {
  responses = 0;
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = typeof request.input === 'string' ? [] : request.input;
    const answered = (items.at(-1) as { type?: string } | undefined)?.type === 'function_call_result';
    this.responses++;
    return {
      usage: new Usage(),
      output: answered
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }]
        : [{ type: 'function_call', id: `fc_${this.responses}`, callId: 'call_0', name: 'charge', arguments: JSON.stringify({ cents: 100 }), status: 'completed' }],
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used');
  }
}

function setup(opts: { guarded?: boolean } = {}) {
  const store = new SqliteStore({ path: tempDb() });
  const charges: Array<{ cents: number }> = [];
  const events: Array<{ type: string; error?: unknown }> = [];
  const charge = tool({
    name: 'charge',
    description: 'charge',
    parameters: z.object({ cents: z.number() }),
    needsApproval: true,
    execute: async (input) => {
      charges.push(input);
      return `charged ${input.cents} (#${charges.length})`;
    },
  });
  const tools = opts.guarded === false ? [charge] : idempotentTools([charge], { store, scope: (_input, rc) => (rc.context as { chat: string }).chat, onEvent: (e) => events.push(e) });
  const agent = new Agent<{ chat: string }>({ name: 'payer', model: new ScriptedModel(), tools });
  return { store, charges, events, agent, runner: new Runner() };
}

const outputs = (r: { newItems: Array<{ type: string; output?: unknown }> }) => r.newItems.filter((i) => i.type === 'tool_call_output_item').map((i) => String(i.output));
const decisionsIn = async (store: InstanceType<typeof SqliteStore>) => (await store.listRecords()).filter((r) => r.name.startsWith('approval:'));

describe('approvals in OpenAI Agents (RunState approve/reject) with idempotentTools', () => {
  it('an approval answered twice (the saved approved run resumed twice, and twice at once): one run; the approval recorded once, for the output item', async () => {
    const { store, charges, agent, runner } = setup();
    const first = await runner.run(agent, 'pay', { context: { chat: 'chat-1' } });
    for (const item of first.interruptions) first.state.approve(item);
    const saved = first.state.toString();
    const a = await runner.run(agent, await RunState.fromString(agent, saved));
    await Promise.all([runner.run(agent, await RunState.fromString(agent, saved)), runner.run(agent, await RunState.fromString(agent, saved))]);
    const b = await runner.run(agent, await RunState.fromString(agent, saved));
    expect(charges).toEqual([{ cents: 100 }]);
    expect(outputs(b)).toEqual(outputs(a));
    const [decision] = await decisionsIn(store);
    expect(decision.name).toBe('approval:approved:charge');
    expect(decision.result).toEqual(expect.objectContaining({ decision: 'approve', scope: 'chat-1', toolCallId: 'call_0', turn: 'fc_1', source: 'openai-agents' }));
  });

  it('the saved run resumed with other arguments under the approved call: not run; the model is told why', async () => {
    const { charges, events, agent, runner } = setup();
    const first = await runner.run(agent, 'pay', { context: { chat: 'chat-1' } });
    for (const item of first.interruptions) first.state.approve(item);
    const saved = first.state.toString();
    await runner.run(agent, await RunState.fromString(agent, saved));
    const edited = saved.split(JSON.stringify(JSON.stringify({ cents: 100 }))).join(JSON.stringify(JSON.stringify({ cents: 900 })));
    expect(edited).not.toBe(saved);
    const r = await runner.run(agent, await RunState.fromString(agent, edited));
    expect(charges).toEqual([{ cents: 100 }]);
    expect(outputs(r)).toEqual([expect.stringMatching(/tool "charge" call call_0 is approved for other arguments than these \(approved\), so it did not run/)]);
    expect(events.find((e) => e.type === 'approval-mismatch')?.error).toBeInstanceOf(ApprovalMismatchError);
  });

  for (const guarded of [false, true]) {
    it(`a rejection (recorded with recordApproval beside state.reject), then the run saved before it resumed approved: ${guarded ? 'never runs' : 'without the guard, it runs'}`, async () => {
      const { store, charges, agent, runner } = setup({ guarded });
      const first = await runner.run(agent, 'pay', { context: { chat: 'chat-1' } });
      const before = first.state.toString();
      const [item] = first.interruptions;
      first.state.reject(item, { message: 'not this month' });
      const raw = item.rawItem as { callId: string; name: string; arguments: string; id: string };
      await recordApproval(store, { scope: 'chat-1', toolCallId: raw.callId, toolName: raw.name, args: JSON.parse(raw.arguments), turn: raw.id, decision: 'reject', reason: 'not this month' });
      const rejected = await runner.run(agent, first.state);
      expect(outputs(rejected)).toEqual(['not this month']);
      const resubmitted = await RunState.fromString(agent, before);
      for (const i of resubmitted.getInterruptions()) resubmitted.approve(i);
      const r = await runner.run(agent, resubmitted);
      expect(charges).toHaveLength(guarded ? 0 : 1);
      if (guarded) expect(outputs(r)).toEqual(['not this month']);
    });
  }

  it('call_0 reused in the next turn after an approval: its own approval, its own run', async () => {
    const { store, charges, agent, runner } = setup();
    let history: AgentInputItem[] = [];
    for (const turn of ['pay', 'pay again']) {
      const asked = await runner.run(agent, [...history, { role: 'user', content: turn }], { context: { chat: 'chat-1' } });
      expect(asked.interruptions).toHaveLength(1);
      for (const item of asked.interruptions) asked.state.approve(item);
      history = (await runner.run(agent, asked.state)).history;
    }
    expect(charges).toHaveLength(2);
    expect((await decisionsIn(store)).map((r) => (r.result as { turn: string }).turn).sort()).toEqual(['fc_1', 'fc_3']);
  });
});

// Issue 29, item 2: with a Chat Completions model the output items carry no id of their own
// (a placeholder, or none) and providers restart call ids every turn. A later turn's
// approved call_0 with other arguments was refused ("approved for other arguments"), and a
// third turn got turn 1's stored result. The scope the docs use (the conversation id) must
// be enough on both kinds of model.
const { rejectToolCall }: typeof import('../dist/integrations/openai-agents.js') = require(`${ROOT}/dist/integrations/openai-agents.js`);

/** call_0 on every user turn, charging the cents of that turn; its item id as the kind of model gives it. */
class TurnsModel implements Model {
  responses = 0;
  constructor(private readonly itemId: (n: number) => string | undefined, private readonly cents: number[]) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = typeof request.input === 'string' ? [{ role: 'user' }] : (request.input as Array<{ role?: string; type?: string }>);
    const answered = items.at(-1)?.type === 'function_call_result';
    const turn = items.filter((i) => i.role === 'user').length;
    this.responses++;
    const id = this.itemId(this.responses);
    return {
      usage: new Usage(),
      output: answered
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }]
        : [{ type: 'function_call', ...(id === undefined ? {} : { id }), callId: 'call_0', name: 'charge', arguments: JSON.stringify({ cents: this.cents[turn - 1] }), status: 'completed' }],
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used');
  }
}

const kinds: Array<[string, (n: number) => string | undefined]> = [
  ['a Chat Completions-style model (item id "__fake_id__")', () => '__fake_id__'],
  ['a Chat Completions-style model (item id "FAKE_ID", as @openai/agents-openai writes it)', () => 'FAKE_ID'],
  ['a model whose items have no id', () => undefined],
  ['a Responses-style model (item ids fc_1, fc_2, ...)', (n) => `fc_${n}`],
];

function turnsSetup(itemId: (n: number) => string | undefined, cents: number[]) {
  const store = new SqliteStore({ path: tempDb() });
  const charges: number[] = [];
  const charge = tool({
    name: 'charge',
    description: 'charge',
    parameters: z.object({ cents: z.number() }),
    needsApproval: true,
    execute: async (input) => {
      charges.push(input.cents);
      return `charged ${input.cents} (#${charges.length})`;
    },
  });
  const scope = (_input: unknown, rc: { context: unknown }) => (rc.context as { conversationId: string }).conversationId;
  const tools = idempotentTools([charge], { store, scope });
  const agent = new Agent<{ conversationId: string }>({ name: 'payer', model: new TurnsModel(itemId, cents), tools });
  return { store, charges, agent, scope, runner: new Runner() };
}

describe('OpenAI Agents: a turn is a turn on both kinds of model (only the conversation id as scope)', () => {
  for (const [kind, itemId] of kinds) {
    it(`${kind}: turn 2's approved call_0 with other arguments runs; turn 3's (turn 1's arguments) runs too, not replaying turn 1`, async () => {
      const { charges, agent, runner } = turnsSetup(itemId, [100, 200, 100]);
      let history: AgentInputItem[] = [];
      const outputs: string[][] = [];
      for (const said of ['pay 100', 'pay 200', 'pay 100 again']) {
        const asked = await runner.run(agent, [...history, { role: 'user', content: said }], { context: { conversationId: 'conv-7' } });
        expect(asked.interruptions).toHaveLength(1);
        for (const item of asked.interruptions) asked.state.approve(item);
        const done = await runner.run(agent, asked.state);
        outputs.push(outputs_(done));
        history = done.history;
      }
      expect(charges).toEqual([100, 200, 100]);
      expect(outputs).toEqual([['charged 100 (#1)'], ['charged 200 (#2)'], ['charged 100 (#3)']]);
    });

    it(`${kind}: the approved run saved and resumed from its string twice, and twice at once: one run`, async () => {
      const { charges, agent, runner } = turnsSetup(itemId, [100]);
      const first = await runner.run(agent, 'pay', { context: { conversationId: 'conv-7' } });
      for (const item of first.interruptions) first.state.approve(item);
      const saved = first.state.toString();
      const a = await runner.run(agent, await RunState.fromString(agent, saved));
      await Promise.all([runner.run(agent, await RunState.fromString(agent, saved)), runner.run(agent, await RunState.fromString(agent, saved))]);
      const b = await runner.run(agent, await RunState.fromString(agent, saved));
      expect(charges).toEqual([100]);
      expect(outputs_(b)).toEqual(outputs_(a));
    });

    it(`${kind}: rejectToolCall (the one line beside state.reject), then the run saved before it resumed and approved: never runs`, async () => {
      const { store, charges, agent, scope, runner } = turnsSetup(itemId, [100]);
      const first = await runner.run(agent, 'pay', { context: { conversationId: 'conv-7' } });
      const before = first.state.toString();
      const [item] = first.interruptions;
      await rejectToolCall(first.state, item, { scope, store, message: 'not this month' });
      expect(outputs_(await runner.run(agent, first.state))).toEqual(['not this month']);
      const resubmitted = await RunState.fromString(agent, before);
      for (const i of resubmitted.getInterruptions()) resubmitted.approve(i);
      const r = await runner.run(agent, resubmitted);
      expect(charges).toEqual([]);
      expect(outputs_(r)).toEqual(['not this month']);
    });
  }
});

function outputs_(r: { newItems: Array<{ type: string; output?: unknown }> }): string[] {
  return r.newItems.filter((i) => i.type === 'tool_call_output_item').map((i) => String(i.output));
}
