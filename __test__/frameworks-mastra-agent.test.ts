// idempotent-tools/mastra end to end: a real Mastra 1.x Agent (in-memory storage), a
// scripted model (MockLanguageModelV3), real SqliteStore files.
//
// Mastra 1.x declares Node >= 22.13, so it is not a dev dependency of this package: it is
// installed into __test__/fixtures/mastra by .ci/mastra.sh. This file is SKIPPED on Node
// older than 22.13, unless IDEMPOTENT_TOOLS_MASTRA_E2E=1 (.ci/mastra.sh sets it: Mastra
// 1.71 runs these cases on Node 20 too). On Node >= 22.13 a missing fixture is a failure.

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const { idempotentTool }: typeof import('../dist/integrations/mastra.js') = require(`${ROOT}/dist/integrations/mastra.js`);
const { SqliteStore, step } = lib;

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

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** Calls `toolName` once on the user turn, then answers with text. */
function fakeModel(toolName: string, input: object) {
  const answer = (prompt: Array<{ role: string }>) =>
    prompt.at(-1)?.role === 'user'
      ? [{ type: 'tool-call' as const, toolCallId: 'call_0', toolName, input: JSON.stringify(input) }]
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

describe('idempotent-tools/mastra with a running Mastra agent (run by .ci/mastra.sh, which installs Mastra)', () => {
  it('a tool that suspends itself: confirm, act, confirm, act, resumed twice, charges once per act', async () => {
    const { Agent, createTool, Mastra, InMemoryStore } = await mastra();
    const store = new SqliteStore({ path: tempDb() });
    const charges: string[] = [];
    const transfer = createTool({
      id: 'transfer',
      description: 'send money',
      inputSchema: z.object({ to: z.string(), cents: z.number() }),
      suspendSchema: z.object({ ask: z.string() }),
      resumeSchema: z.object({ stage: z.string() }),
      execute: idempotentTool(async function transfer(input: { to: string; cents: number }, context) {
        const agent = context.agent as { resumeData?: { stage: string }; suspend: (payload: unknown) => Promise<unknown> };
        if (agent.resumeData === undefined) return agent.suspend({ ask: `send ${input.cents} to ${input.to}?` });
        const charge = await step('charge', async () => {
          charges.push(`charge ${input.cents}`);
          return `ch-${charges.length}`;
        });
        if (agent.resumeData.stage !== 'fee') return agent.suspend({ ask: 'also the fee?' });
        const fee = await step('fee', async () => {
          charges.push('fee 100');
          return `ch-${charges.length}`;
        });
        return { charge, fee };
      }, { store, scope: 'conversation-1' }),
    });
    const payer = new Agent({ id: 'payer', name: 'payer', instructions: 'pay', model: fakeModel('transfer', { to: 'bob', cents: 500 }), tools: { transfer } });
    const agent = new Mastra({ agents: { payer }, storage: new InMemoryStore(), logger: false }).getAgent('payer');

    const first = await agent.generate('send bob 5');
    expect(first.finishReason).toBe('suspended');
    expect(first.suspendPayload.suspendPayload).toEqual({ ask: 'send 500 to bob?' });
    const second = await agent.resumeGenerate({ stage: 'charge' }, { runId: first.runId, toolCallId: 'call_0' });
    expect(second.finishReason).toBe('suspended');
    expect(second.suspendPayload.suspendPayload).toEqual({ ask: 'also the fee?' });
    expect(charges).toEqual(['charge 500']);
    const done = await agent.resumeGenerate({ stage: 'fee' }, { runId: first.runId, toolCallId: 'call_0' });
    expect(done.text).toBe('done');
    expect(charges).toEqual(['charge 500', 'fee 100']);
  });

  it('call_0 reused every turn: the next turn\'s identical call runs', async () => {
    const { Agent, createTool, Mastra, InMemoryStore } = await mastra();
    const store = new SqliteStore({ path: tempDb() });
    const sent: string[] = [];
    const sendEmail = createTool({
      id: 'send_email',
      description: 'email',
      inputSchema: z.object({ to: z.string(), text: z.string() }),
      execute: idempotentTool(async function sendEmail(input: { to: string; text: string }) {
        sent.push(`${input.to}: ${input.text}`);
        return `sent ${sent.length}`;
      }, { store, scope: 'conversation-1' }),
    });
    const mailer = new Agent({ id: 'mailer', name: 'mailer', instructions: 'mail', model: fakeModel('send_email', { to: 'bob', text: 'hi' }), tools: { sendEmail } });
    const agent = new Mastra({ agents: { mailer }, storage: new InMemoryStore(), logger: false }).getAgent('mailer');
    let history: unknown[] = [];
    for (let turn = 1; turn <= 3; turn++) {
      const r = await agent.generate([...history, { role: 'user', content: `turn ${turn}` }]);
      history = r.messages;
    }
    expect(sent).toHaveLength(3);
  });
});
