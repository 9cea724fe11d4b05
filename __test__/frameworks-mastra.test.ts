// idempotent-tools/mastra against Mastra's context shape (the end-to-end test with a running
// Mastra agent is frameworks-mastra-agent.test.ts, run by .ci/mastra.sh). These tests call the
// wrapped execute the way Mastra 1.x's tool executor does (execute(inputData, context),
// with context.agent = { agentId, toolCallId, threadId, resourceId, resumeData, ... }, as
// typed in @mastra/core/dist/tools/types.d.ts, AgentToolExecutionContext).

import { createRequire } from 'node:module';

import { describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTool }: typeof import('../dist/integrations/mastra.js') = require(`${ROOT}/dist/integrations/mastra.js`);
const { SqliteStore } = lib;

function setup(options: Partial<Parameters<typeof idempotentTool>[1]> = {}) {
  const payments: unknown[] = [];
  const events: string[] = [];
  const execute = idempotentTool(
    async function sendPayment(input: { orderId: string; cents: number }) {
      payments.push(input);
      return { receipt: `r-${payments.length}` };
    },
    { store: new SqliteStore({ path: tempDb() }), onEvent: (e) => events.push(e.type), ...options },
  );
  return { execute, payments, events };
}

const agentContext = (over: Record<string, unknown> = {}) => ({
  mastra: { some: 'instance' },
  runId: 'run-1',
  abortSignal: new AbortController().signal,
  agent: { agentId: 'payer', toolCallId: 'call_0', threadId: 'thread-1', resourceId: 'user-1', messages: [], suspend: async () => {}, ...over },
});

describe('idempotent-tools/mastra (context shape of @mastra/core 1.x; not end to end)', () => {
  it('an approved tool resumed (run again from the top, same toolCallId) charges once', async () => {
    const { execute, payments, events } = setup();
    const input = { orderId: 'o-1', cents: 1999 };
    const first = await execute(input, agentContext());
    const resumed = await execute(input, agentContext({ resumeData: { approved: true } }));
    expect(resumed).toEqual(first);
    expect(payments).toHaveLength(1);
    expect(events).toEqual(['executed', 'replayed']);
  });

  it('the turn is the run and the step that made the call, never a position: the same run with its history trimmed replays; another run, or call_0 in a later step, runs (issue 29, item 1)', async () => {
    const { execute, payments } = setup();
    const input = { orderId: 'o-1', cents: 1 };
    const stamp = (text: string, at: number) => ({ role: 'user', content: [{ type: 'text', text, providerOptions: { mastra: { createdAt: at } } }] });
    const older = [stamp('hello', 1), { role: 'assistant', content: [{ type: 'text', text: 'hi' }] }];
    await execute(input, { ...agentContext({ messages: [...older, stamp('pay', 2)] }), runId: 'run-1' } as never);
    // The same run resumed (approveToolCall), memory sending fewer messages, timestamps rewritten.
    await execute(input, { ...agentContext({ messages: [{ role: 'assistant', content: [{ type: 'text', text: 'hi' }] }, stamp('pay', 3)] }), runId: 'run-1' } as never);
    expect(payments).toHaveLength(1);
    // A later turn is another run; a later step of one run has the first call_0's result before it.
    await execute(input, { ...agentContext({ messages: [...older, stamp('pay', 2)] }), runId: 'run-2' } as never);
    const step2 = [...older, stamp('pay', 2), { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'call_0', toolName: 'sendPayment', input }] }, { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call_0', toolName: 'sendPayment', output: { type: 'json', value: { receipt: 'r-2' } } }] }];
    await execute(input, { ...agentContext({ messages: step2 }), runId: 'run-2' } as never);
    expect(payments).toHaveLength(3);
  });

  it('different arguments, another thread, or another call id run again', async () => {
    const { execute, payments } = setup();
    await execute({ orderId: 'o-1', cents: 1 }, agentContext());
    await execute({ orderId: 'o-2', cents: 1 }, agentContext({ toolCallId: 'call_1' }));
    await execute({ orderId: 'o-1', cents: 1 }, agentContext({ threadId: 'thread-2' }));
    expect(payments).toHaveLength(3);
  });

  it('a scope option replaces the thread (agents without memory)', async () => {
    const { execute, payments } = setup({ scope: (_input, ctx) => (ctx.requestContext as { get(k: string): string }).get('conversationId') });
    const ctx = { runId: 'run-9', agent: { toolCallId: 'call_0', messages: [] }, requestContext: new Map([['conversationId', 'conv-9']]) };
    await execute({ orderId: 'o-1', cents: 1 }, ctx as never);
    await execute({ orderId: 'o-1', cents: 1 }, ctx as never);
    expect(payments).toHaveLength(1);
  });

  it('missing framework context or scope: clear TypeErrors, nothing runs', async () => {
    const { execute, payments } = setup();
    await expect(execute({ orderId: 'o', cents: 1 }, undefined as never)).rejects.toThrow(/without context\.agent\.toolCallId.*Mastra agent/s);
    await expect(execute({ orderId: 'o', cents: 1 }, { workflow: { runId: 'r' } })).rejects.toThrow(/workflow step/);
    await expect(execute({ orderId: 'o', cents: 1 }, { agent: { toolCallId: 'c' } })).rejects.toThrow(/no memory thread.*"scope" option/s);
    const scoped = setup({ scope: () => undefined });
    await expect(scoped.execute({ orderId: 'o', cents: 1 }, agentContext())).rejects.toThrow(/"scope" option returned undefined/);
    expect(payments).toHaveLength(0);
    expect(scoped.payments).toHaveLength(0);
  });
});

describe('idempotentTools() over a Mastra tools record (context shape; the running agent is in e2e/node22/mastra.mjs)', () => {
  const { idempotentTools }: typeof import('../dist/integrations/mastra.js') = require(`${ROOT}/dist/integrations/mastra.js`);
  /** Like createTool's result: a class instance whose own properties Mastra reads. */
  class Tool {
    constructor(readonly id: string, readonly execute?: (input: any, context: any) => Promise<unknown>) {}
    describe() {
      return `tool ${this.id}`;
    }
  }

  it('keeps each tool\'s class and properties; a business key makes a re-call under a new toolCallId a replay', async () => {
    const payments: unknown[] = [];
    const raw = {
      sendPayment: new Tool('send-payment', async (input: { orderId: string }) => {
        payments.push(input);
        return { receipt: `r-${payments.length}` };
      }),
      lookup: new Tool('lookup', async () => 'open'),
      clientSide: new Tool('client-side'),
    };
    const tools = idempotentTools(raw, { store: new SqliteStore({ path: tempDb() }), readOnly: ['lookup'], tools: { sendPayment: { key: (i: { orderId: string }) => i.orderId } } });
    expect(tools.lookup).toBe(raw.lookup);
    expect(tools.clientSide).toBe(raw.clientSide);
    expect(tools.sendPayment).toBeInstanceOf(Tool);
    expect(tools.sendPayment.describe()).toBe('tool send-payment');
    const a = await tools.sendPayment.execute!({ orderId: 'o-1' }, agentContext({ toolCallId: 'call_1' }));
    const b = await tools.sendPayment.execute!({ orderId: 'o-1' }, agentContext({ toolCallId: 'call_2', messages: [{ role: 'assistant', content: [] }] }));
    expect(b).toEqual(a);
    expect(payments).toHaveLength(1);
    await expect(tools.sendPayment.execute!({ orderId: 'o-1', extra: 1 }, agentContext({ toolCallId: 'call_3' }))).rejects.toThrow(/tool "sendPayment".*business key "o-1"/);
  });

  it('a requireApproval function is asked as Mastra asks it: the request context as a plain object (the approved call runs, its approval recorded)', async () => {
    // Mastra 1.71 calls it with (input, { args, requestContext: Object.fromEntries(requestContext.entries()), workspace });
    // the tool's execute gets the RequestContext itself (get/set/entries: a Map stands in for it here).
    const payments: unknown[] = [];
    const events: string[] = [];
    const asked: unknown[] = [];
    const pay = Object.assign(new Tool('pay', async (input: { cents: number }) => (payments.push(input), 'paid')), {
      requireApproval: (_input: unknown, ctx: { requestContext: { user: { role: string } } }) => (asked.push(ctx), ctx.requestContext.user.role !== 'admin'),
    });
    const tools = idempotentTools({ pay }, { store: new SqliteStore({ path: tempDb() }), scope: 'conv-1', onEvent: (e) => events.push(e.type) });
    const requestContext = new Map<string, unknown>([['user', { role: 'clerk' }]]);
    await expect(tools.pay.execute!({ cents: 1 }, { ...agentContext(), requestContext })).resolves.toBe('paid');
    expect(payments).toHaveLength(1);
    expect(asked).toEqual([{ args: { cents: 1 }, requestContext: { user: { role: 'clerk' } } }]);
    expect(events).toEqual(['approved', 'executed']);
  });

  it('a missing memory thread names the tool and the "scope" option', async () => {
    const tools = idempotentTools({ sendPayment: new Tool('send-payment', async () => 1) }, { store: new SqliteStore({ path: tempDb() }) });
    await expect(tools.sendPayment.execute!({}, agentContext({ threadId: undefined }))).rejects.toThrow(/tool "sendPayment".*no memory thread.*"scope" option/);
  });
});
