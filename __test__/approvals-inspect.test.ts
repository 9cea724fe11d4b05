// Approval decisions beside executions, through the real CLI (`inspect --status rejected`,
// `--status approved`, `--key`) and the inspector page's API: the decisions of an AI SDK
// conversation (an approved call that ran, a rejected one that was refused), on a SQLite file.

import { createRequire } from 'node:module';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, runNode, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTool }: typeof import('../dist/integrations/ai-sdk.js') = require(`${ROOT}/dist/integrations/ai-sdk.js`);
const ui: typeof import('../dist/apps/ui/server.js') = require(join(ROOT, 'dist', 'apps', 'ui', 'server.js'));
type IdempotencyRecord = import('../dist/core/store.js').IdempotencyRecord;

const CLI = join(ROOT, 'dist', 'cli.js');
const cli = (...args: string[]) => runNode([CLI, ...args]);

let db: string;
let rejectedKey: string;

/** The history of one assistant turn with two calls, each with an approval request, and the user's answers. */
function history(answers: Array<[string, boolean, string?]>) {
  return [
    { role: 'user', content: 'pay' },
    {
      role: 'assistant',
      content: [
        ...answers.map(([id], i) => ({ type: 'tool-call', toolCallId: id, toolName: 'charge', input: { cents: 100 * (i + 1) } })),
        ...answers.map(([id]) => ({ type: 'tool-approval-request', approvalId: `ap-${id}`, toolCallId: id })),
      ],
    },
    { role: 'tool', content: answers.map(([id, approved, reason]) => ({ type: 'tool-approval-response', approvalId: `ap-${id}`, approved, reason })) },
  ];
}

beforeAll(async () => {
  db = tempDb();
  const store = new lib.SqliteStore({ path: db });
  const charge = idempotentTool(async function charge(input: { cents: number }) {
    return `charged ${input.cents}`;
  }, { store, scope: 'chat-9' });
  // call_1 approved (runs; its sibling's denial, with a reason that tries to move the cursor, is recorded);
  const messages = history([['call_1', true], ['call_2', false, 'over \u001b[2Jbudget']]);
  await charge({ cents: 100 }, { toolCallId: 'call_1', messages });
  // then a resubmission that approves call_2: refused.
  const flipped = history([['call_1', true], ['call_2', true]]);
  await expect(charge({ cents: 200 }, { toolCallId: 'call_2', messages: flipped })).rejects.toThrow(lib.ToolCallRejectedError);
  rejectedKey = (await store.listRecords()).find((r) => r.name === 'approval:rejected:charge')!.key;
  await store.close();
});

describe('inspect shows decisions beside executions', () => {
  it('--status rejected: the rejection, then its call\'s refused execution; --status approved: the approval, then its run', async () => {
    const rejected = JSON.parse((await cli('--db', db, 'inspect', '--status', 'rejected', '--json')).stdout) as IdempotencyRecord[];
    expect(rejected.map((r) => [r.name, r.status, r.meta?.toolCallId])).toEqual([
      ['approval:rejected:charge', 'completed', 'call_2'],
      ['charge', 'failed', 'call_2'],
    ]);
    expect(rejected[1].error).toEqual({ name: 'ToolCallRejectedError', message: expect.stringMatching(/call call_2 was rejected/) });
    const approved = JSON.parse((await cli('--db', db, 'inspect', '--status', 'approved', '--json')).stdout) as IdempotencyRecord[];
    expect(approved.map((r) => [r.name, r.status, r.meta?.toolCallId])).toEqual([
      ['approval:approved:charge', 'completed', 'call_1'],
      ['charge', 'completed', 'call_1'],
    ]);
  });

  it('the table says the decision in the status column; one decision in full says who, why and for which turn, escaped', async () => {
    const table = (await cli('--db', db, 'inspect', '--status', 'rejected')).stdout;
    expect(table).toMatch(/approval\|charge\|call_2\|\S+\s+(?:kid_[0-9a-f]+|-)\s+approval:rejected:charge\s+rejected\s/);
    expect(table).toMatch(/\s+charge\s+failed\s/);
    const one = await cli('--db', db, 'inspect', '--key', rejectedKey);
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^status\s+rejected$/m);
    expect(one.stdout).toMatch(/^decision\s+reject$/m);
    expect(one.stdout).toMatch(/^reason\s+over \\x1b\[2Jbudget$/m);
    expect(one.stdout).toMatch(/^turn\s+ap-call_2$/m);
    expect(one.stdout).toMatch(/^recorded by\s+ai-sdk$/m);
    expect(one.stdout).not.toContain('\u001b');
  });

  it('a status that is neither says what to give', async () => {
    const bad = await cli('--db', db, 'inspect', '--status', 'denied');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/give pending, completed or failed \(calls\), or approved, edited or rejected \(approval decisions\)/);
  });
});

describe('the inspector page', () => {
  let inspector: Awaited<ReturnType<typeof ui.serveInspector>>;
  let store: InstanceType<typeof lib.SqliteStore>;
  beforeAll(async () => {
    store = new lib.SqliteStore({ path: db });
    inspector = await ui.serveInspector({ store, where: 'test store' });
  });
  afterAll(async () => {
    await inspector.close();
    await store.close();
  });

  it('/api/records?status=rejected lists the rejection with its refused execution', async () => {
    const res = await fetch(`${new URL(inspector.url).origin}/api/records?status=rejected`, { headers: { 'x-inspector-token': inspector.token } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { records: IdempotencyRecord[] };
    expect(body.records.map((r) => [r.name, r.status])).toEqual([['approval:rejected:charge', 'completed'], ['charge', 'failed']]);
  });

  it('the timeline counts calls only: decisions are not executions', async () => {
    const res = await fetch(`${new URL(inspector.url).origin}/api/timeline`, { headers: { 'x-inspector-token': inspector.token } });
    const body = (await res.json()) as { tools: Array<{ name: string }> };
    expect(body.tools.map((t) => t.name)).toEqual(['charge']);
  });
});
