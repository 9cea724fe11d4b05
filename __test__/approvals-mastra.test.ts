// Approvals in Mastra 1.x: a real Agent whose tool has requireApproval, idempotentTools over
// its tools, approveToolCall / declineToolCall, a scripted model (MockLanguageModelV3),
// real SqliteStore files. Mastra is installed into __test__/fixtures/mastra by
// .ci/mastra.sh (it declares Node >= 22.13), which runs this file by name; npm test leaves it
// out (vitest.config.mts), as it does frameworks-mastra-agent.test.ts.

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTools }: typeof import('../dist/integrations/mastra.js') = require(`${ROOT}/dist/integrations/mastra.js`);
const { SqliteStore, recordApproval } = lib;

const FIXTURE = join(ROOT, '__test__', 'fixtures', 'mastra');

async function mastra() {
  if (!existsSync(join(FIXTURE, 'node_modules', '@mastra', 'core'))) {
    throw new Error('@mastra/core is not installed for this test: run .ci/mastra.sh (npm install --prefix __test__/fixtures/mastra)');
  }
  const from = createRequire(join(FIXTURE, 'package.json'));
  const load = (entry: string) => import(pathToFileURL(from.resolve(entry)).href);
  const [{ Agent }, { createTool }, { Mastra }, { InMemoryStore }] = await Promise.all([
    load('@mastra/core/agent'), load('@mastra/core/tools'), load('@mastra/core'), load('@mastra/core/storage'),
  ]);
  return { Agent, createTool, Mastra, InMemoryStore };
}

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** Calls `charge` (id call_0 every turn) on a user turn, answers with text after a tool result. */
function fakeModel() {
  const answer = (prompt: Array<{ role: string }>) =>
    prompt.at(-1)?.role === 'user'
      ? [{ type: 'tool-call' as const, toolCallId: 'call_0', toolName: 'charge', input: JSON.stringify({ cents: 100 }) }]
      : [{ type: 'text' as const, text: 'done' }];
  const finish = (content: Array<{ type: string }>) => ({ unified: content[0].type === 'text' ? ('stop' as const) : ('tool-calls' as const), raw: undefined });
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const content = answer(prompt);
      return { content, finishReason: finish(content), usage, warnings: [] };
    },
    doStream: async ({ prompt }) => {
      const content = answer(prompt);
      const parts = content.flatMap((c) => (c.type === 'text' ? [{ type: 'text-start' as const, id: 't' }, { type: 'text-delta' as const, id: 't', delta: c.text }, { type: 'text-end' as const, id: 't' }] : [c]));
      return { stream: convertArrayToReadableStream([{ type: 'stream-start' as const, warnings: [] }, ...parts, { type: 'finish' as const, finishReason: finish(content), usage }]) };
    },
  });
}

async function setup(opts: { guarded?: boolean } = {}) {
  const { Agent, createTool, Mastra, InMemoryStore } = await mastra();
  const store = new SqliteStore({ path: tempDb() });
  const charges: Array<{ cents: number }> = [];
  const raw = {
    charge: createTool({
      id: 'charge',
      description: 'charge',
      inputSchema: z.object({ cents: z.number() }),
      requireApproval: true,
      execute: async (input: { cents: number }) => {
        charges.push(input);
        return `charged ${input.cents} (#${charges.length})`;
      },
    }),
  };
  const tools = opts.guarded === false ? raw : idempotentTools(raw, { store, scope: 'conversation-1' });
  const payer = new Agent({ id: 'payer', name: 'payer', instructions: 'pay', model: fakeModel(), tools });
  const agent = new Mastra({ agents: { payer }, storage: new InMemoryStore(), logger: false }).getAgent('payer');
  /** A turn that stops at the approval; returns its run id. */
  const ask = async (messages: unknown) => {
    const out = await agent.stream(messages);
    const types: string[] = [];
    for await (const chunk of out.fullStream) types.push(chunk.type);
    expect(types).toContain('tool-call-approval');
    return out.runId as string;
  };
  /** Drains an approval's stream; returns the tool results and errors it carried (or the refusal, when Mastra refuses). */
  const answer = async (call: () => Promise<{ fullStream: AsyncIterable<{ type: string; payload?: { result?: unknown; error?: unknown } }> }>) => {
    try {
      const out = await call();
      const got: string[] = [];
      for await (const chunk of out.fullStream) {
        if (chunk.type === 'tool-result') got.push(`result ${JSON.stringify(chunk.payload?.result)}`);
        if (chunk.type === 'tool-error') got.push(`error ${String((chunk.payload?.error as Error)?.message ?? chunk.payload?.error)}`);
      }
      return got;
    } catch (err) {
      return [`refused ${(err as Error).message.split('\n')[0]}`];
    }
  };
  return { store, charges, agent, ask, answer };
}

describe('approvals in Mastra (requireApproval, approveToolCall) with idempotentTools', () => {
  for (const guarded of [false, true]) {
    it(`an approval answered twice, at once and then again (mastra#24590): ${guarded ? 'the tool runs once; the approval recorded once, for the run' : 'without the guard, it runs twice'}`, async () => {
      const { store, charges, agent, ask, answer } = await setup({ guarded });
      const runId = await ask('pay');
      await Promise.all([answer(() => agent.approveToolCall({ runId })), answer(() => agent.approveToolCall({ runId }))]);
      await answer(() => agent.approveToolCall({ runId }));
      expect(charges).toHaveLength(guarded ? 1 : 2);
      if (!guarded) return;
      const decisions = (await store.listRecords()).filter((r) => r.name.startsWith('approval:'));
      expect(decisions.map((r) => r.name)).toEqual(['approval:approved:charge']);
      expect(decisions[0].result).toEqual(expect.objectContaining({ decision: 'approve', scope: 'conversation-1', toolCallId: 'call_0', turn: runId, source: 'mastra' }));
    });
  }

  for (const guarded of [false, true]) {
    it(`a rejection recorded by the UI (beside declineToolCall), then the run approved: ${guarded ? 'the tool never runs' : 'without the guard, it runs'}`, async () => {
      const { store, charges, agent, ask, answer } = await setup({ guarded });
      const runId = await ask('pay');
      // The UI records its decision, then tells Mastra; a second request approves the same run.
      await recordApproval(store, { scope: 'conversation-1', toolCallId: 'call_0', toolName: 'charge', turn: runId, decision: 'reject', reason: 'not this month' });
      const got = await answer(() => agent.approveToolCall({ runId }));
      expect(charges).toHaveLength(guarded ? 0 : 1);
      if (guarded) expect(got.join('\n')).toMatch(/call call_0 was rejected: "not this month"; it does not run/);
    });
  }

  it('a decline, then the same run approved: Mastra runs nothing (and the guard has nothing to refuse)', async () => {
    const { charges, agent, ask, answer } = await setup();
    const runId = await ask('pay');
    await answer(() => agent.declineToolCall({ runId, reason: 'no' }));
    await answer(() => agent.approveToolCall({ runId }));
    expect(charges).toEqual([]);
  });

  it('call_0 reused in the next turn after an approval: its own run id, its own decision, its own run', async () => {
    const { store, charges, agent, ask, answer } = await setup();
    const first = await ask('pay');
    await answer(() => agent.approveToolCall({ runId: first }));
    const second = await ask([{ role: 'user', content: 'pay' }, { role: 'assistant', content: 'done' }, { role: 'user', content: 'pay again' }]);
    expect(second).not.toBe(first);
    await answer(() => agent.approveToolCall({ runId: second }));
    expect(charges).toHaveLength(2);
    const turns = (await store.listRecords()).filter((r) => r.name.startsWith('approval:')).map((r) => (r.result as { turn: string }).turn).sort();
    expect(turns).toEqual([first, second].sort());
  });
});
