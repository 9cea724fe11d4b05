// Mastra 1.x: an approved (or suspended and resumed) tool runs again from its first line
// with the same toolCallId; idempotentTool replays the first charge.
//
//   node examples/mastra/index.mjs      (offline, a temp SQLite file)
//
// @mastra/core 1.x requires Node >= 22.13, and this repository's tooling runs on Node 20, so
// this example does not load Mastra: it calls the wrapped execute twice with the context
// Mastra 1.x passes (execute(inputData, context), context.runId, context.agent.toolCallId/threadId), the
// way Mastra's tool executor does on approve/resume. With Mastra installed, use it as:
//
//   createTool({ id: 'send-payment', inputSchema, requireApproval: true, execute })
//
// Exits non-zero if the payment ran more than once.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { SqliteStore } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/mastra';

const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-mastra-'));
const store = new SqliteStore({ path: join(dir, 'store.db') });
const charges = [];

const execute = idempotentTool(
  async function sendPayment({ orderId, cents }) {
    charges.push({ orderId, cents });
    return { chargeId: `ch_${charges.length}` };
  },
  {
    store,
    // Default scope: the agent's memory thread (context.agent.threadId). Without memory, pass
    // scope: (input, context) => context.requestContext.get('conversationId').
    onEvent: (e) => console.log(`  sendPayment ${e.type} (tool call ${e.toolCallId})`),
  },
);

// Mastra passes the run's id (a resumed run keeps it) and the agent's call.
const context = (resumeData) => ({
  runId: 'run-42',
  agent: { agentId: 'payer', toolCallId: 'call_0', threadId: 'thread-42', resourceId: 'user-7', messages: [], suspend: async () => {}, resumeData },
});
console.log('first run:');
console.log(`  ${JSON.stringify(await execute({ orderId: 'o-42', cents: 1999 }, context(undefined)))}`);
console.log('resumed after approval (runs from the top):');
console.log(`  ${JSON.stringify(await execute({ orderId: 'o-42', cents: 1999 }, context({ approved: true })))}`);

store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`charges: ${charges.length}`);
if (charges.length !== 1) {
  console.error('FAIL: the payment ran more than once');
  process.exit(1);
}
