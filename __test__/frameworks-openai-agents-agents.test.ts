// idempotent-tools/openai-agents in agents shaped the way users write them: the real
// @openai/agents-core Runner, a scripted Model, real SqliteStore files.

import { createRequire } from 'node:module';

import { Agent, type AgentInputItem, type Model, type ModelRequest, type ModelResponse, RunState, Runner, Usage, setTracingDisabled, tool } from '@openai/agents-core';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTool }: typeof import('../dist/integrations/openai-agents.js') = require(`${ROOT}/dist/integrations/openai-agents.js`);
const { SqliteStore } = lib;

setTracingDisabled(true);

/** Calls `send_payment` with call id `call_0` on every user turn (a provider that restarts ids); output item ids are unique. */
class ScriptedModel implements Model {
  responses = 0;
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = typeof request.input === 'string' ? [] : request.input;
    const last = items.at(-1) as { type?: string; role?: string } | undefined;
    const answered = last?.type === 'function_call_result';
    this.responses++;
    return {
      usage: new Usage(),
      responseId: `resp-${this.responses}`,
      output: answered
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'paid' }] }]
        : [{ type: 'function_call', id: `fc_${this.responses}`, callId: 'call_0', name: 'send_payment', arguments: JSON.stringify({ orderId: 'o-1' }), status: 'completed' }],
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used');
  }
}

interface Ctx { conversationId: string }

describe('idempotent-tools/openai-agents in agents', () => {
  it('tool({ execute: idempotentTool(async function send_payment ...) }) takes its name from execute; this is kept; resumed twice charges once', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    const thisSeen: unknown[] = [];
    const sendPayment = tool({
      description: 'charge',
      parameters: z.object({ orderId: z.string() }),
      needsApproval: true,
      execute: idempotentTool(async function send_payment(this: unknown, input: { orderId: string }) {
        thisSeen.push(this);
        payments.push(input);
        return { receipt: `r-${payments.length}` };
      }, { store, scope: (_input, rc) => (rc.context as Ctx).conversationId }),
    });
    expect(sendPayment.name).toBe('send_payment');
    const agent = new Agent<Ctx>({ name: 'payer', model: new ScriptedModel(), tools: [sendPayment] });
    const runner = new Runner();
    const first = await runner.run(agent, 'pay', { context: { conversationId: 'conv-1' } });
    for (const item of first.interruptions) first.state.approve(item);
    const saved = first.state.toString();
    await runner.run(agent, await RunState.fromString(agent, saved));
    await runner.run(agent, await RunState.fromString(agent, saved));
    expect(payments).toHaveLength(1);
    // The Agents SDK calls options.execute(...): the wrapper passes that `this` on.
    expect(thisSeen[0]).toEqual(expect.objectContaining({ parameters: expect.anything() }));
  });

  it('a provider that reuses call_0 every turn: the next turn\'s identical call runs (the output item id tells turns apart)', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    const sendPayment = tool({
      name: 'send_payment',
      description: 'charge',
      parameters: z.object({ orderId: z.string() }),
      execute: idempotentTool(async function sendPayment(input: { orderId: string }) {
        payments.push(input);
        return `r-${payments.length}`;
      }, { store, scope: (_input, rc) => (rc.context as Ctx).conversationId }),
    });
    const agent = new Agent<Ctx>({ name: 'payer', model: new ScriptedModel(), tools: [sendPayment] });
    const runner = new Runner();
    let history: AgentInputItem[] = [];
    for (let turn = 1; turn <= 3; turn++) {
      const r = await runner.run(agent, [...history, { role: 'user', content: `pay again (${turn})` }], { context: { conversationId: 'conv-1' } });
      history = r.history;
    }
    expect(payments).toHaveLength(3);
  });

  it('an anonymous execute takes its name from the tool call', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const payments: unknown[] = [];
    const sendPayment = tool({
      name: 'send_payment',
      description: 'charge',
      parameters: z.object({ orderId: z.string() }),
      execute: idempotentTool(async (input: { orderId: string }) => {
        payments.push(input);
        return 'ok';
      }, { store, scope: 'conv-1' }),
    });
    const agent = new Agent<Ctx>({ name: 'payer', model: new ScriptedModel(), tools: [sendPayment] });
    await new Runner().run(agent, 'pay', { context: { conversationId: 'conv-1' } });
    expect(payments).toHaveLength(1);
    expect((await store.listRecords()).map((r) => r.name)).toEqual(['send_payment']);
  });
});
