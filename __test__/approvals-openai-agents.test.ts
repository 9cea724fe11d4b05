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
const { rejectToolCall, idempotentTool }: typeof import('../dist/integrations/openai-agents.js') = require(`${ROOT}/dist/integrations/openai-agents.js`);

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

// Issue 36 (the case docs/approvals.md listed as what the helper could not tell): a run saved
// at its approval and resumed only after a later turn of the conversation asked approval for
// the same call id. The resumed run took the newest kept turn: with the same arguments, the
// older call was handed the later call's payment ("charged 100 (#1)"), one charge for two
// requests. Now it finds its own turn (by its arguments, and the one no run has taken yet),
// and where nothing tells the two apart (either resumed again, both taken), it is refused.
describe('OpenAI Agents: an older saved run resumed after a later turn asked approval for the same call id', () => {
  for (const [kind, itemId] of kinds) {
    const idless = !kind.includes('Responses');
    for (const cents of [[100, 250], [100, 100]]) {
      it(`${kind}, turns charging ${cents.join(' then ')}: the older run charges its own; resumed again, ${idless ? 'refused where the turns cannot be told apart' : 'replayed'}`, async () => {
        const { charges, agent, runner } = turnsSetup(itemId, cents);
        const context = { conversationId: 'conv-9' };
        const first = await runner.run(agent, [{ role: 'user', content: 'pay' }], { context });
        for (const item of first.interruptions) first.state.approve(item);
        const older = first.state.toString(); // saved, approved, not resumed yet
        const second = await runner.run(agent, [{ role: 'user', content: 'pay' }, { role: 'user', content: 'pay again' }], { context });
        for (const item of second.interruptions) second.state.approve(item);
        expect(outputs_(await runner.run(agent, second.state))).toEqual([`charged ${cents[1]} (#1)`]);

        expect(outputs_(await runner.run(agent, await RunState.fromString(agent, older)))).toEqual([`charged ${cents[0]} (#2)`]);
        expect(charges).toEqual([cents[1], cents[0]]);

        const again = outputs_(await runner.run(agent, await RunState.fromString(agent, older)));
        if (idless && cents[0] === cents[1]) expect(again).toEqual([expect.stringMatching(/could be either of several calls of this conversation.*business key/s)]);
        else expect(again).toEqual([`charged ${cents[0]} (#2)`]);
        expect(charges).toEqual([cents[1], cents[0]]);
      });
    }
  }

  it('a saved run edited to arguments no turn asked for, resumed after two turns of call_0: refused, not run under the newest turn', async () => {
    const { charges, agent, runner } = turnsSetup(() => 'FAKE_ID', [100, 100]);
    const context = { conversationId: 'conv-5' };
    const first = await runner.run(agent, [{ role: 'user', content: 'pay' }], { context });
    for (const item of first.interruptions) first.state.approve(item);
    const older = first.state.toString();
    const second = await runner.run(agent, [{ role: 'user', content: 'pay' }, { role: 'user', content: 'pay again' }], { context });
    for (const item of second.interruptions) second.state.approve(item);
    await runner.run(agent, second.state);
    const edited = older.split(JSON.stringify(JSON.stringify({ cents: 100 }))).join(JSON.stringify(JSON.stringify({ cents: 900 })));
    expect(edited).not.toBe(older);
    const r = outputs_(await runner.run(agent, await RunState.fromString(agent, edited)));
    expect(r).toEqual([expect.stringMatching(/could be either of several calls of this conversation/)]);
    expect(charges).toEqual([100]);
  });

  it('the markers of taken turns expire with the turns they mark (ttlMs), not never', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charge = tool({ name: 'charge', description: 'charge', parameters: z.object({ cents: z.number() }), needsApproval: true, execute: async ({ cents }) => `charged ${cents}` });
    const scope = (_input: unknown, rc: { context: unknown }) => (rc.context as { conversationId: string }).conversationId;
    const agent = new Agent<{ conversationId: string }>({ name: 'payer', model: new TurnsModel(() => 'FAKE_ID', [100]), tools: idempotentTools([charge], { store, scope, ttlMs: 3_600_000 }) });
    const runner = new Runner();
    const first = await runner.run(agent, 'pay', { context: { conversationId: 'conv-3' } });
    for (const item of first.interruptions) first.state.approve(item);
    const saved = first.state.toString();
    await runner.run(agent, first.state); // in this run: its own turn, marked taken
    await runner.run(agent, await RunState.fromString(agent, saved)); // resumed: the kept turn, taken already
    // The package's own records too (listRecords leaves them out unless asked: key-id.ts).
    const records = await store.listRecords({ [Symbol.for('idempotent-tools.with-key-id-secret')]: true } as object);
    const turns = records.filter((r) => r.name.startsWith('idempotent-tools:turn:'));
    const markers = records.filter((r) => r.name === 'idempotent-tools:turn-invoked');
    expect(turns).toHaveLength(1);
    expect(markers).toHaveLength(1);
    expect(markers[0].expiresAt).not.toBeNull();
    expect(markers[0].expiresAt!).toBeGreaterThanOrEqual(turns[0].expiresAt!);
    await store.close();
  });
});

// Issue 36, finding 4: the Runner does not ask needsApproval again for a call id it holds a
// decision for, so a later model response in the same run that says call_0 again (a model
// whose items carry no id) was keyed under the first call's minted turn and replayed: one
// payment made, two requested.
/** call_0 with the same arguments in each of its first `calls` responses (item ids as `itemId` gives them: none, a placeholder, or one per response), then text. */
class RepeatingModel implements Model {
  responses = 0;
  constructor(private readonly calls: number, private readonly itemId?: string | ((n: number) => string)) {}
  async getResponse(): Promise<ModelResponse> {
    this.responses++;
    const id = typeof this.itemId === 'function' ? this.itemId(this.responses) : this.itemId;
    return {
      usage: new Usage(),
      output:
        this.responses <= this.calls
          ? [{ type: 'function_call', ...(id === undefined ? {} : { id }), callId: 'call_0', name: 'charge', arguments: JSON.stringify({ cents: 100 }), status: 'completed' }]
          : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }],
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used');
  }
}

describe('OpenAI Agents: an approved call id reused later in the run (issue 36, finding 4)', () => {
  // The identity harness (stress/identity/drivers/openai-agents.mjs) found the Responses-style
  // case: the later call_0 has an item id of its own, so it was keyed apart (no replay), but it
  // ran under the approval the Runner holds for call_0, which the user gave the first call.
  const reusing: Array<[string, string | ((n: number) => string) | undefined]> = [
    ['items without ids', undefined],
    ['item id FAKE_ID', 'FAKE_ID'],
    ['a Responses-style model (item ids fc_1, fc_2)', (n) => `fc_${n}`],
  ];
  for (const [kind, itemId] of reusing) {
    it(`${kind}: the later call_0 is neither replayed from the approved payment nor run under its approval`, async () => {
      const charges: number[] = [];
      const runner = new Runner();
      const store = new SqliteStore({ path: tempDb() });
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
      const tools = idempotentTools([charge], { store, scope: (_input, rc) => (rc.context as { conversationId: string }).conversationId });
      const agent = new Agent<{ conversationId: string }>({ name: 'payer', model: new RepeatingModel(2, itemId), tools });
      const asked = await runner.run(agent, 'pay 100, then pay 100 again', { context: { conversationId: 'conv-9' } });
      expect(asked.interruptions).toHaveLength(1);
      for (const item of asked.interruptions) asked.state.approve(item);
      const done = await runner.run(agent, asked.state);
      const out = outputs_(done);
      expect(charges).toEqual([100]);
      expect(out[0]).toBe('charged 100 (#1)');
      // The second call_0: not "charged 100 (#1)" again (a payment the model would count as made).
      expect(out.slice(1)).toEqual([expect.stringMatching(/reuses the id of a call approved earlier.*not run/s)]);
    });
  }

  it('the per-tool idempotentTool, a Responses-style model: the later call_0 does not run under the approval of the first', async () => {
    const charges: number[] = [];
    const store = new SqliteStore({ path: tempDb() });
    const charge = tool({
      name: 'charge',
      description: 'charge',
      parameters: z.object({ cents: z.number() }),
      needsApproval: true,
      execute: idempotentTool(async (input: { cents: number }) => {
        charges.push(input.cents);
        return `charged ${input.cents} (#${charges.length})`;
      }, { store, scope: (_input, rc) => (rc.context as { conversationId: string }).conversationId }),
    });
    const agent = new Agent<{ conversationId: string }>({ name: 'payer', model: new RepeatingModel(2, (n) => `fc_${n}`), tools: [charge] });
    const runner = new Runner();
    const asked = await runner.run(agent, 'pay 100, then pay 100 again', { context: { conversationId: 'conv-11' } });
    for (const item of asked.interruptions) asked.state.approve(item);
    const out = outputs_(await runner.run(agent, asked.state));
    expect(charges).toEqual([100]);
    expect(out[0]).toBe('charged 100 (#1)');
    expect(out.slice(1)).toEqual([expect.stringMatching(/reuses the id of a call approved earlier.*not run/s)]);
  });

  it('without approval, each call_0 of the run is its own call: both run', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const charges: number[] = [];
    const charge = tool({
      name: 'charge',
      description: 'charge',
      parameters: z.object({ cents: z.number() }),
      execute: async (input) => {
        charges.push(input.cents);
        return `charged ${input.cents} (#${charges.length})`;
      },
    });
    const tools = idempotentTools([charge], { store, scope: 'conv-10' });
    const agent = new Agent({ name: 'payer', model: new RepeatingModel(2), tools });
    const done = await new Runner().run(agent, 'pay twice');
    expect(charges).toEqual([100, 100]);
    expect(outputs_(done)).toEqual(['charged 100 (#1)', 'charged 100 (#2)']);
  });
});

// Issue 36: a model whose responses carry no item id but whose provider makes its call ids
// unique (OpenAI's own call_ + 24 characters, streamed through a Chat Completions adapter that
// writes FAKE_ID): the call id names the call. The same response delivered again in a new run
// (a response cache, a deterministic model: the identity harness's "same input again") is the
// same call, as it is on a Responses-style model, whose item id repeats with it.
/** One call with a unique call id (items as `itemId` gives them), then text. */
class UniqueIdModel implements Model {
  constructor(private readonly itemId: string | undefined, private readonly callId = 'call_Q2x7LmVb9TcR4kWp0ZsHy3Nd') {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = typeof request.input === 'string' ? [] : (request.input as Array<{ type?: string }>);
    const answered = items.at(-1)?.type === 'function_call_result';
    return {
      usage: new Usage(),
      output: answered
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }]
        : [{ type: 'function_call', ...(this.itemId === undefined ? {} : { id: this.itemId }), callId: this.callId, name: 'charge', arguments: JSON.stringify({ cents: 100 }), status: 'completed' }],
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used');
  }
}

describe('OpenAI Agents: a unique call id from a model without item ids names its call', () => {
  for (const itemId of ['FAKE_ID', '__fake_id__', undefined]) {
    for (const perTool of [false, true]) {
      it(`item id ${String(itemId)}, ${perTool ? 'the per-tool idempotentTool' : 'idempotentTools'}: the same response in a new run replays; another unique id runs`, async () => {
        const store = new SqliteStore({ path: tempDb() });
        const charges: number[] = [];
        const body = async (input: { cents: number }) => {
          charges.push(input.cents);
          return `charged ${input.cents} (#${charges.length})`;
        };
        const scope = (_input: unknown, rc: { context: unknown }) => (rc.context as { conversationId: string }).conversationId;
        const charge = tool({ name: 'charge', description: 'charge', parameters: z.object({ cents: z.number() }), execute: perTool ? idempotentTool(body, { store, scope }) : body });
        const tools = perTool ? [charge] : idempotentTools([charge], { store, scope });
        const runner = new Runner();
        const context = () => ({ context: { conversationId: 'conv-12' } });
        const agent = new Agent<{ conversationId: string }>({ name: 'payer', model: new UniqueIdModel(itemId), tools });
        const a = outputs_(await runner.run(agent, 'pay', context()));
        const b = outputs_(await runner.run(agent, 'pay', context()));
        const other = new Agent<{ conversationId: string }>({ name: 'payer', model: new UniqueIdModel(itemId, 'call_Zr8PqWe2XcV5nB7mK1LtY9Ua'), tools });
        const c = outputs_(await runner.run(other, 'pay', context()));
        expect(charges).toEqual([100, 100]);
        expect(a).toEqual(['charged 100 (#1)']);
        expect(b).toEqual(a);
        expect(c).toEqual(['charged 100 (#2)']);
      });
    }
  }
});

// Issue 36, finding 4 through a saved run: the identity harness resumed a RunState saved at a
// later interruption (a second call, call_1, waiting for approval) whose run had already run
// the approved call_0; the model's next response said call_0 again. The resumed RunContext
// holds call_0's approval, and nothing of the run's in-process turns: without item ids the
// later call_0 took call_0's kept turn and was replayed from the first payment; with item ids
// it ran under the first call's approval.
/** The responses of one run, from `first` on (a resumed run goes on where it was saved): each a list of calls, then text. */
class StepsModel implements Model {
  private next: number;
  constructor(private readonly steps: Array<Array<{ callId: string; cents: number }>>, private readonly itemId: (step: number, i: number) => string | undefined, first = 0) {
    this.next = first;
  }
  async getResponse(): Promise<ModelResponse> {
    const step = this.next++;
    const calls = this.steps[step];
    return {
      usage: new Usage(),
      output:
        calls === undefined
          ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }]
          : calls.map((c, i) => {
              const id = this.itemId(step, i);
              return { type: 'function_call' as const, ...(id === undefined ? {} : { id }), callId: c.callId, name: 'charge', arguments: JSON.stringify({ cents: c.cents }), status: 'completed' as const };
            }),
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used');
  }
}

describe('OpenAI Agents: a saved run resumed at a later interruption, then an approved call id reused (issue 36, finding 4)', () => {
  const steps = [[{ callId: 'call_0', cents: 100 }], [{ callId: 'call_1', cents: 250 }], [{ callId: 'call_0', cents: 100 }]];
  const itemKinds: Array<[string, (step: number, i: number) => string | undefined]> = [
    ['items without ids', () => undefined],
    ['item id FAKE_ID', () => 'FAKE_ID'],
    ['a Responses-style model (item ids fc_<step>_<i>)', (step, i) => `fc_${step}_${i}`],
  ];
  for (const [kind, itemId] of itemKinds) {
    it(`${kind}: the later call_0 is refused in the resumed run as in the first one; nothing is replayed from call_0's payment`, async () => {
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
      const tools = idempotentTools([charge], { store, scope: (_input, rc) => (rc.context as { conversationId: string }).conversationId });
      const agentAt = (first: number) => new Agent<{ conversationId: string }>({ name: 'payer', model: new StepsModel(steps, itemId, first), tools });
      const runner = new Runner();
      let r = await runner.run(agentAt(0), 'pay', { context: { conversationId: 'conv-13' } });
      for (const item of r.interruptions) r.state.approve(item); // call_0
      r = await runner.run(agentAt(1), r.state);
      expect(r.interruptions.map((i) => (i.rawItem as { callId: string }).callId)).toEqual(['call_1']);
      for (const item of r.interruptions) r.state.approve(item);
      const saved = r.state.toString(); // at the second interruption: call_0 ran, call_1 approved
      const first = outputs_(await runner.run(agentAt(2), r.state));
      const resumed = outputs_(await runner.run(agentAt(2), await RunState.fromString(agentAt(2), saved)));
      expect(charges).toEqual([100, 250]);
      expect(first).toEqual(['charged 100 (#1)', 'charged 250 (#2)', expect.stringMatching(/reuses the id of a call approved earlier.*not run/s)]);
      // The resumed run: call_1 replayed, the later call_0 refused (not "charged 100 (#1)", not a third charge).
      expect(resumed.slice(-2)).toEqual(['charged 250 (#2)', expect.stringMatching(/reuses the id of a call approved earlier.*not run/s)]);
    });
  }
});
