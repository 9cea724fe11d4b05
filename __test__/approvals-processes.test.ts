// Two processes resume one approved tool call on a shared store (a SQLite file, Redis), in
// LangChain (createAgent + humanInTheLoopMiddleware), the AI SDK (an approved history
// submitted by two requests) and OpenAI Agents (one saved RunState resumed twice). The
// race is driven, not timed: the second resumes while the first one's tool is running,
// and the first finishes only once the second waits on it. The tool runs once; both get
// its result; the approval is recorded once.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { Agent, RunState, Runner, Usage, setTracingDisabled, tool as agentsTool } from '@openai/agents-core';
import { type ModelMessage, generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, collect, lib, lineFrom, tempDb, tempDir } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const require = createRequire(import.meta.url);
const { idempotentTools: aiTools }: typeof import('../dist/integrations/ai-sdk.js') = require(`${ROOT}/dist/integrations/ai-sdk.js`);
const CHILD = join(ROOT, '__test__', 'fixtures', 'approval-resume.mjs');

const redis = await sharedRedis();
afterAll(() => redis.stop());
setTracingDisabled(true);

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** The approved history a client submits: the model's call, its approval request, the user's approval. */
async function approvedHistory(): Promise<ModelMessage[]> {
  const model = new MockLanguageModelV3({
    doGenerate: async () => ({
      content: [{ type: 'tool-call', toolCallId: 'call_0', toolName: 'charge', input: JSON.stringify({ cents: 500 }) }],
      finishReason: { unified: 'tool-calls', raw: undefined },
      usage,
      warnings: [],
    }),
  });
  const tools = aiTools({ charge: tool({ inputSchema: z.object({ cents: z.number() }), needsApproval: true, execute: async () => 'never' }) }, { store: new lib.SqliteStore({ path: tempDb() }), scope: 'unused' });
  const messages: ModelMessage[] = [{ role: 'user', content: 'pay' }];
  const first = await generateText({ model, tools, messages });
  const [request] = first.content.filter((p) => p.type === 'tool-approval-request') as Array<{ approvalId: string }>;
  return [...messages, ...first.response.messages, { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved: true }] }];
}

/** A run of the payer agent stopped at its approval, approved and saved (what the children resume). */
async function approvedRunState(): Promise<string> {
  const model = {
    async getResponse() {
      return { usage: new Usage(), output: [{ type: 'function_call' as const, id: 'fc_1', callId: 'call_0', name: 'charge', arguments: JSON.stringify({ cents: 500 }), status: 'completed' as const }] };
    },
    async *getStreamedResponse(): AsyncIterable<never> {
      throw new Error('not used');
    },
  };
  const charge = agentsTool({ name: 'charge', description: 'charge', parameters: z.object({ cents: z.number() }), needsApproval: true, execute: async () => 'never' });
  const agent = new Agent({ name: 'payer', model, tools: [charge] });
  const first = await new Runner().run(agent, 'pay');
  for (const item of first.interruptions) first.state.approve(item);
  return first.state.toString();
}

async function race(framework: string, where: Record<string, string>, extra: Record<string, unknown>) {
  const log = join(tempDir(), 'charges.log');
  const children = [0, 1].map(() =>
    spawn(process.execPath, [CHILD, JSON.stringify({ framework, log, ...where, ...extra })], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] }),
  );
  const [a, b] = children;
  const finished = Promise.all(children.map(collect));
  await Promise.all(children.map((c) => lineFrom(c, /^READY$/)));
  const aRuns = lineFrom(a, /^RUNNING$/);
  a.stdin!.write('go\n');
  await aRuns;
  const bWaits = lineFrom(b, /^WAITING$/);
  b.stdin!.write('go\n');
  await bWaits; // b found a's run in flight: it waits for its result
  a.stdin!.write('release\n');
  for (const c of children) c.stdin!.end();
  const done = await finished;
  for (const f of done) expect(f.stderr.replace(/.*ExperimentalWarning.*\n|.*--trace-warnings.*\n/g, '')).toBe('');
  expect(done.map((f) => f.code)).toEqual([0, 0]);
  const results = done.map((f) => JSON.parse(f.stdout.split('RESULT ')[1]));
  return { charges: readFileSync(log, 'utf8').split('\n').filter(Boolean), results, outputs: done.map((f) => f.stdout) };
}

const places: Array<[string, () => Record<string, string>]> = [
  ['a SQLite file', () => ({ db: tempDb() })],
  ['Redis', () => ({ redis: redis.url, prefix: uniquePrefix() })],
];

for (const [placeName, place] of places) {
  describe(`two processes resume one approval on ${placeName}`, () => {
    it('LangChain (createAgent, humanInTheLoopMiddleware, idempotentToolsMiddleware): the tool runs once, both get its result', async () => {
      const where = place();
      const { charges, results } = await race('langchain', where, {});
      expect(charges).toHaveLength(1);
      expect(results[0]).toEqual(['charged 500']);
      expect(results[1]).toEqual(results[0]);
      await expectOneApproval(where, 'thread-shared');
    });

    it('the AI SDK (the approved history submitted by two requests): the tool runs once, both get its result', async () => {
      const where = place();
      const { charges, results } = await race('ai-sdk', where, { history: await approvedHistory() });
      expect(charges).toHaveLength(1);
      expect(results[0]).toEqual([{ type: 'text', value: 'charged 500' }]);
      expect(results[1]).toEqual(results[0]);
      await expectOneApproval(where, 'chat-shared');
    });

    it('OpenAI Agents (one saved RunState resumed twice): the tool runs once, both get its result', async () => {
      const where = place();
      const { charges, results } = await race('openai-agents', where, { state: await approvedRunState() });
      expect(charges).toHaveLength(1);
      expect(results[0]).toEqual(['charged 500']);
      expect(results[1]).toEqual(results[0]);
      await expectOneApproval(where, 'conv-shared');
    });
  });
}

async function expectOneApproval(where: Record<string, string>, scope: string) {
  const store = where.db ? new lib.SqliteStore({ path: where.db }) : new lib.RedisStore({ url: where.redis, prefix: where.prefix });
  try {
    const records = await store.listRecords();
    const decisions = records.filter((r) => r.name.startsWith('approval:approved:'));
    expect(decisions).toHaveLength(1);
    expect(decisions[0].result).toEqual(expect.objectContaining({ decision: 'approve', scope, toolCallId: 'call_0', toolName: 'charge' }));
    expect(records.filter((r) => r.name === 'charge').map((r) => r.status)).toEqual(['completed']);
  } finally {
    await store.close();
  }
}
