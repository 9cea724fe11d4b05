// The current @openai/agents (Node >= 22 project): idempotentTools over an agent's tools with a
// business key. The tool throws once (0.20's default errorFunction hands the model a fixed
// message), the model calls again under new call ids: the failed call is not replayed, the
// next runs, the one after replays it, and other input under the key is an error the model
// sees. (The timeoutMs flow runs in examples/openai-agents/index.mjs, also against 0.20.)
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Agent, Runner, Usage, setTracingDisabled, tool } from '@openai/agents';
import { SqliteStore } from 'idempotent-tools';
import { idempotentTools } from 'idempotent-tools/openai-agents';
import { z } from 'zod';

setTracingDisabled(true);
const args = [{ orderId: 'o-1', cents: 5 }, { orderId: 'o-1', cents: 5 }, { orderId: 'o-1', cents: 5 }, { orderId: 'o-1', cents: 9 }];
const model = {
  async getResponse(request) {
    const n = request.input.filter((i) => i.type === 'function_call_result').length;
    return {
      usage: new Usage(),
      output: n < args.length
        ? [{ type: 'function_call', id: `fc_${n}`, callId: `call_${n}`, name: 'send_payment', arguments: JSON.stringify(args[n]), status: 'completed' }]
        : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }],
    };
  },
  async *getStreamedResponse() { throw new Error('not used'); },
};
let fail = true;
const charges = [];
const pay = tool({
  name: 'send_payment',
  description: 'Charge an order',
  parameters: z.object({ orderId: z.string(), cents: z.number() }),
  execute: async (input) => {
    if (fail) {
      fail = false;
      throw new Error('declined');
    }
    charges.push(input);
    return `paid #${charges.length}`;
  },
});
const store = new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'e2e-agents-')), 'store.db') });
const tools = idempotentTools([pay], { store, scope: 'conv-1', key: (input) => `order-${input.orderId}` });
const r = await new Runner().run(new Agent({ name: 'payer', model, tools }), 'pay o-1');
const out = r.newItems.filter((i) => i.type === 'tool_call_output_item').map((i) => String(i.output));
await store.close();
const ok = charges.length === 1 && out[1] === 'paid #1' && out[2] === 'paid #1' && /KeyMismatchError.*business key "order-o-1"/.test(out[3] ?? '');
console.log(`${ok ? 'ok  ' : 'FAIL'} @openai/agents: throw, re-call, replay, mismatch under a business key: ${charges.length} charge(s) (want 1)`);
for (const o of out) console.log(`     ${o.slice(0, 120)}`);
process.exit(ok ? 0 : 1);
