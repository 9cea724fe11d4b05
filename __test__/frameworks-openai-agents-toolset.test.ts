// idempotentTools(agent tools, options) from idempotent-tools/openai-agents: one line over an
// agent's tools array, with the real @openai/agents-core Runner, a scripted Model (which calls
// again under a new call id when it sees an error or a timeout, as models do), real SqliteStore files.

import { createRequire } from 'node:module';

import { Agent, type Model, type ModelRequest, type ModelResponse, RunContext, Runner, Usage, setTracingDisabled, tool } from '@openai/agents-core';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTools }: typeof import('../dist/integrations/openai-agents.js') = require(`${ROOT}/dist/integrations/openai-agents.js`);
const { SqliteStore } = lib;

setTracingDisabled(true);

/**
 * Calls `toolName` with `args[n]` (call id call_n) after n results, then answers; each call a
 * new id. With `untilDone`, it calls again (new id, same args) while the last result says "timed out".
 */
class ReCallingModel implements Model {
  constructor(private readonly toolName: string, private readonly args: object[], private readonly untilDone = false) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = (typeof request.input === 'string' ? [] : request.input) as Array<{ type?: string; output?: unknown }>;
    const results = items.filter((i) => i.type === 'function_call_result');
    const n = results.length;
    const timedOut = this.untilDone && n > 0 && n < 50 && /timed out/.test(JSON.stringify(results.at(-1)!.output));
    if (timedOut) this.args.push(this.args.at(-1)!);
    return {
      usage: new Usage(),
      responseId: `resp-${n}`,
      output: n < this.args.length
        ? [{ type: 'function_call', id: `fc_${n}`, callId: `call_${n}`, name: this.toolName, arguments: JSON.stringify(this.args[n]), status: 'completed' }]
        : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }],
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not used');
  }
}

const outputs = (r: { newItems: Array<{ type: string; output?: unknown }> }) =>
  r.newItems.filter((i) => i.type === 'tool_call_output_item').map((i) => (typeof i.output === 'string' ? i.output : JSON.stringify(i.output)));

describe('idempotentTools() over an OpenAI Agents tools array', () => {
  it('timeoutMs gives up on a slow charge; the model calls again under a new id and joins the first run (business key): one charge', async () => {
    for (const keyed of [false, true]) {
      const charges: unknown[] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let starts = 0;
      const pay = tool({
        name: 'send_payment',
        description: 'charge an order',
        parameters: z.object({ orderId: z.string(), cents: z.number() }),
        timeoutMs: 20,
        execute: async (input) => {
          if (++starts === 2) release(); // without the key, the re-call runs: let the first finish too
          await gate; // the payment provider is slow: past timeoutMs
          charges.push(input);
          return `paid ${input.orderId} (#${charges.length})`;
        },
      });
      const tools = idempotentTools([pay], {
        store: new SqliteStore({ path: tempDb() }),
        scope: 'conv-1',
        pollIntervalMs: 5,
        onEvent: (e) => e.type === 'in-flight' && release(), // the re-call waits on the first run: let it finish
        tools: keyed ? { send_payment: { key: (input: { orderId: string }) => `order-${input.orderId}` } } : {},
      });
      // The model calls again (a new call id each time) while it is told "timed out"; a call
      // that waits on the first run is inside timeoutMs too, so it may time out and be re-called.
      const model = new ReCallingModel('send_payment', [{ orderId: 'o-1', cents: 500 }], true);
      const r = await new Runner().run(new Agent({ name: 'payer', model, tools }), 'pay o-1', { maxTurns: 60 });
      const out = outputs(r);
      expect(out[0]).toMatch(/timed out/);
      if (keyed) {
        expect(out.at(-1)).toBe('paid o-1 (#1)');
        expect(starts).toBe(1);
        expect(charges).toHaveLength(1);
      } else {
        expect(starts).toBeGreaterThanOrEqual(2); // the control: a new call id is a new call
      }
    }
  });

  it('a business key: a re-call after an error runs again (failed is not a result); other input under the key is an error the model sees', async () => {
    const charges: unknown[] = [];
    let fail = true;
    const pay = tool({
      name: 'send_payment',
      description: 'charge',
      parameters: z.object({ orderId: z.string(), cents: z.number() }),
      execute: async (input) => {
        if (fail) {
          fail = false;
          throw new Error('card declined, try again');
        }
        charges.push(input);
        return `paid #${charges.length}`;
      },
    });
    const tools = idempotentTools([pay], { store: new SqliteStore({ path: tempDb() }), scope: 'conv-1', key: (input: { orderId: string }) => input.orderId });
    const model = new ReCallingModel('send_payment', [
      { orderId: 'o-1', cents: 5 }, // throws: the model sees the SDK's error message
      { orderId: 'o-1', cents: 5 }, // runs (the record is failed, not a result)
      { orderId: 'o-1', cents: 5 }, // replays
      { orderId: 'o-1', cents: 9 }, // other input under the same key
    ]);
    const r = await new Runner().run(new Agent({ name: 'payer', model, tools }), 'pay');
    const out = outputs(r);
    expect(out[0]).toMatch(/An error occurred while running the tool.*card declined/);
    expect(out.slice(1, 3)).toEqual(['paid #1', 'paid #1']);
    expect(out[3]).toMatch(/KeyMismatchError.*tool "send_payment".*business key "o-1"/);
    expect(charges).toHaveLength(1);
  });

  it('read-only tools and non-function tools are left as they are; unknown names and a missing scope are refused, naming them', async () => {
    const search = tool({ name: 'search', description: 's', parameters: z.object({ q: z.string() }), execute: async () => 'hit' });
    const pay = tool({ name: 'send_payment', description: 'p', parameters: z.object({ q: z.string() }), execute: async () => 'ok' });
    const hosted = { type: 'hosted_tool', name: 'web_search' };
    const [s, p, h] = idempotentTools([search, pay, hosted], { store: new SqliteStore({ path: tempDb() }), scope: 'c', readOnly: ['search'] });
    expect(s).toBe(search);
    expect(h).toBe(hosted);
    expect(p).not.toBe(pay);
    // needsApproval is asked through the guard (which learns of each new call there), and answers as the tool's own.
    const rc = new RunContext({});
    expect(await (p as typeof pay).needsApproval(rc, { q: 'x' }, 'call_1')).toBe(await pay.needsApproval(rc, { q: 'x' }, 'call_1'));
    expect(() => idempotentTools([search], { scope: 'c', readOnly: ['serach'] })).toThrow(/tool "serach".*not in the tool set.*"search"/);
    expect(() => idempotentTools([pay], {} as never)).toThrow(/tool "send_payment".*needs a "scope" option/);
  });
});
