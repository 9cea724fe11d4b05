// idempotent-tools/openai-agents end to end: the real @openai/agents-core Runner, tool
// approval and RunState serialization, a scripted Model, real SqliteStore files.

import { createRequire } from 'node:module';

import { Agent, type Model, type ModelRequest, type ModelResponse, RunState, Runner, Usage, setTracingDisabled, tool } from '@openai/agents-core';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTool }: typeof import('../dist/integrations/openai-agents.js') = require(`${ROOT}/dist/integrations/openai-agents.js`);
const { SqliteStore } = lib;

setTracingDisabled(true);

/** Calls the scripted tools on the user turn; once tool results are in, answers with text. */
class ScriptedModel implements Model {
  constructor(private readonly calls: Array<{ callId: string; args: object }>) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = typeof request.input === 'string' ? [] : request.input;
    const done = items.some((i) => i.type === 'function_call_result');
    return {
      usage: new Usage(),
      responseId: `resp-${done ? 2 : 1}`,
      output: done
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'paid' }] }]
        : this.calls.map((c, i) => ({ type: 'function_call' as const, id: `fc_${i}`, callId: c.callId, name: 'send_payment', arguments: JSON.stringify(c.args), status: 'completed' as const })),
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used');
  }
}

interface Ctx { conversationId?: string }

function setup(calls: Array<{ callId: string; args: object }>, scope: Parameters<typeof idempotentTool>[1]['scope'] = (_i, rc) => (rc.context as Ctx).conversationId) {
  const store = new SqliteStore({ path: tempDb() });
  const payments: unknown[] = [];
  const events: string[] = [];
  const sendPayment = tool({
    name: 'send_payment',
    description: 'charge',
    parameters: z.object({ orderId: z.string(), cents: z.number() }),
    needsApproval: true,
    execute: idempotentTool(
      async function sendPayment(input: { orderId: string; cents: number }) {
        payments.push(input);
        return { receipt: `r-${payments.length}` };
      },
      { store, scope, onEvent: (e) => events.push(e.type) },
    ),
  });
  const agent = new Agent<Ctx>({ name: 'payer', instructions: 'pay', model: new ScriptedModel(calls), tools: [sendPayment] });
  return { agent, payments, events, runner: new Runner() };
}

/** Runs until the approval interruption, approves it all, and returns the serialized state. */
async function approvedState(runner: Runner, agent: Agent<Ctx>, context: Ctx): Promise<string> {
  const first = await runner.run(agent, 'pay order o-1', { context });
  expect(first.interruptions.length).toBeGreaterThan(0);
  for (const item of first.interruptions) first.state.approve(item);
  return first.state.toString();
}

const PAY = { callId: 'call_0', args: { orderId: 'o-1', cents: 1999 } };

describe('idempotent-tools/openai-agents, end to end', () => {
  it('the same approved RunState resumed twice charges once', async () => {
    const { agent, payments, events, runner } = setup([PAY]);
    const saved = await approvedState(runner, agent, { conversationId: 'conv-1' });
    expect(payments).toHaveLength(0);

    const a = await runner.run(agent, await RunState.fromString(agent, saved));
    const b = await runner.run(agent, await RunState.fromString(agent, saved)); // resumed again
    expect(payments).toHaveLength(1);
    expect(events).toEqual(['approved', 'executed', 'replayed']); // the approval is recorded just before the run (docs/approvals.md)
    expect(a.finalOutput).toBe('paid');
    expect(b.finalOutput).toBe('paid');
    const outputOf = (r: typeof a) => r.newItems.find((i) => i.type === 'tool_call_output_item')?.output;
    expect(outputOf(b)).toEqual(outputOf(a));
  });

  it('without the wrapper, resuming twice charges twice (the scenario is real)', async () => {
    let charges = 0;
    const bare = tool({ name: 'send_payment', description: 'charge', parameters: z.object({ orderId: z.string(), cents: z.number() }), needsApproval: true, execute: async () => ++charges });
    const agent = new Agent<Ctx>({ name: 'payer', model: new ScriptedModel([PAY]), tools: [bare] });
    const runner = new Runner();
    const saved = await approvedState(runner, agent, {});
    await runner.run(agent, await RunState.fromString(agent, saved));
    await runner.run(agent, await RunState.fromString(agent, saved));
    expect(charges).toBe(2);
  });

  it('the same tool with different arguments in one turn runs each; the conversation scopes call ids', async () => {
    const calls = [PAY, { callId: 'call_1', args: { orderId: 'o-2', cents: 5 } }];
    const { agent, payments, events, runner } = setup(calls);
    for (const conversationId of ['conv-a', 'conv-b']) {
      const saved = await approvedState(runner, agent, { conversationId });
      await runner.run(agent, await RunState.fromString(agent, saved));
    }
    expect(payments).toHaveLength(4);
    expect(events.filter((e) => e !== 'approved')).toEqual(['executed', 'executed', 'executed', 'executed']);
    expect(events.filter((e) => e === 'approved')).toHaveLength(4); // each call's approval, recorded once
  });

  it('a missing scope is a clear error, and nothing runs', async () => {
    expect(() => idempotentTool(async function pay() { return 1; }, {} as never)).toThrow(/needs a "scope" option.*runContext\.context\.conversationId/s);
    const { agent, payments, runner } = setup([PAY]);
    const saved = await approvedState(runner, agent, {}); // no conversationId in the context
    const out = await runner.run(agent, await RunState.fromString(agent, saved));
    const output = out.newItems.find((i) => i.type === 'tool_call_output_item')?.output;
    expect(String(output)).toMatch(/"scope" option returned undefined/);
    expect(payments).toHaveLength(0);
  });

  it('called by hand without details.toolCall.callId: a clear TypeError', async () => {
    const wrapped = idempotentTool(async function pay(input: { n: number }) { return input.n; }, { scope: 'conv', store: new SqliteStore({ path: tempDb() }) });
    await expect(wrapped({ n: 1 }, { context: {} })).rejects.toThrow(/without details\.toolCall\.callId.*Runner/s);
    // A call id alone (no item id, no turn minted): providers restart ids, so it is refused, naming "key".
    await expect(wrapped({ n: 1 }, { context: {} }, { toolCall: { callId: 'c' } })).rejects.toMatchObject({ code: 'CANNOT_TELL', option: 'key' });
    await expect(wrapped({ n: 1 }, { context: {} }, { toolCall: { callId: 'c', id: 'fc_1' } })).resolves.toBe(1);
  });
});
