// The Claude Agent SDK end to end: the real runtime (its native binary) against a fake
// Messages API on 127.0.0.1, tools guarded by idempotent-tools/claude-agent-sdk.

import { createSdkMcpServer, query, tool } from '@anthropic-ai/claude-agent-sdk';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { type ApiRequest, type Block, type FakeApi, fakeMessagesApi, offlineEnv, toolResults } from './claude-agent-sdk-helpers';
import { ROOT, lib, tempDb, tempDir } from './helpers';
import { COUNTING, count } from './mcp-helpers';

const require = createRequire(import.meta.url);
const claude: typeof import('../dist/integrations/claude-agent-sdk.js') = require(join(ROOT, 'dist', 'integrations', 'claude-agent-sdk.js'));

const TOOL = 'mcp__pay__send_payment';
const pay = (id: string, input: Record<string, unknown> = { orderId: 'o-42', cents: 1999 }): Block => ({ type: 'tool_use', id, name: TOOL, input });
const done: Block = { type: 'text', text: 'Paid.' };

let api: FakeApi | undefined;
let home = tempDir();
beforeEach(() => {
  home = tempDir();
});
afterEach(async () => {
  await api?.close();
  api = undefined;
});

/** A payment tool that counts its charges; `gate` holds it until released (a slow call). */
function payments() {
  const charges: Array<{ orderId: string; cents: number }> = [];
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  let release: (() => void) | undefined;
  const gate = { hold: false, started: startedP, release: () => release?.() };
  const sendPayment = tool('send_payment', 'Charge an order', { orderId: z.string(), cents: z.number() }, async ({ orderId, cents }) => {
    started();
    if (gate.hold) await new Promise<void>((r) => (release = r));
    charges.push({ orderId, cents });
    return { content: [{ type: 'text' as const, text: `charged ${orderId} ${cents} (charge ${charges.length})` }] };
  });
  return { charges, sendPayment, gate };
}

interface Run {
  sessionId: string;
  result: string | undefined;
  /** The tool results the runtime got from the handlers, as it recorded them. */
  told: unknown[];
}

/** One query() to its end (or until `abort` fires). */
async function run(prompt: string, options: Record<string, unknown>, onSession?: (id: string) => void): Promise<Run> {
  let sessionId = '';
  let result: string | undefined;
  const told: unknown[] = [];
  try {
    // One HOME per test: the sessions a resume reads live under it.
    for await (const m of query({ prompt, options: { env: offlineEnv(api!, home), cwd: home, model: 'claude-sonnet-4-5', ...options } as never })) {
      const message = m as { session_id?: string; type: string; result?: string; message?: { content?: unknown } };
      if (message.session_id && sessionId === '') onSession?.(message.session_id);
      if (message.session_id) sessionId = message.session_id;
      if (message.type === 'result') result = message.result;
      if (message.type === 'user' && Array.isArray(message.message?.content)) {
        for (const c of message.message.content as Array<{ type?: string; content?: unknown; is_error?: boolean }>) {
          if (c.type === 'tool_result') told.push({ content: c.content, is_error: c.is_error === true });
        }
      }
    }
  } finally {
    // nothing to release: the runtime ends with the iteration
  }
  return { sessionId, result, told };
}

/**
 * A fake model that answers its requests in order with `turns`, then "Paid.". (A resumed
 * session's runtime runs a re-sent tool_use, but does not show the model a second result for
 * an id its history answered already: a model keyed on "was I given a result" would loop.)
 */
function scripted(turns: Block[][]) {
  let i = 0;
  return (_request: ApiRequest): Block[] => turns[i++] ?? [done];
}

describe('idempotent-tools/claude-agent-sdk with the real runtime', () => {
  it('a tool call runs once; a resumed session that re-sends it, and a fork, get the first CallToolResult', async () => {
    const store = new lib.SqliteStore({ path: tempDb() });
    const { charges, sendPayment } = payments();
    const server = createSdkMcpServer({ name: 'pay', version: '1.0.0', tools: claude.idempotentTools([sendPayment], { store }) });
    // Each query: the model calls toolu_01A09q90qw90lq917835lq9 (on resume: the re-sent assistant message), then answers.
    api = await fakeMessagesApi(scripted([[pay('toolu_01A09q90qw90lq917835lq9')], [done], [pay('toolu_01A09q90qw90lq917835lq9')], [done], [pay('toolu_01A09q90qw90lq917835lq9')], [done]]));
    const options = { mcpServers: { pay: server }, allowedTools: [TOOL] };
    const first = await run('Pay order o-42', options);
    expect(first.result).toBe('Paid.');
    expect(charges).toHaveLength(1);
    expect(first.told).toHaveLength(1);
    expect(toolResults(api.requests[1])).toHaveLength(1);

    const resumed = await run('Go on', { ...options, resume: first.sessionId });
    expect(charges).toHaveLength(1);
    // The runtime gets exactly the first answer.
    expect(resumed.told).toEqual(first.told);

    const forked = await run('Go on', { ...options, resume: first.sessionId, forkSession: true });
    expect(forked.sessionId).not.toBe(first.sessionId);
    expect(charges).toHaveLength(1);
    expect(forked.told).toEqual(first.told);
    await store.close();
  });

  it('numbered tool_use ids that restart in every response, with a conversation scope: never the first charge handed to the second turn (the identity harness found it; issue 36)', async () => {
    const store = new lib.SqliteStore({ path: tempDb() });
    const { charges, sendPayment } = payments();
    // Two turns of one conversation, each paying o-42 under toolu_01 (a gateway that counts).
    api = await fakeMessagesApi(scripted([[pay('toolu_01')], [done], [pay('toolu_01')], [done]]));
    const options = () => ({ mcpServers: { pay: createSdkMcpServer({ name: 'pay', version: '1.0.0', tools: claude.idempotentTools([sendPayment], { store, scope: 'conversation-7' }) }) }, allowedTools: [TOOL] });
    const first = await run('Pay order o-42', options());
    const second = await run('Pay order o-42 again', { ...options(), resume: first.sessionId });
    // Before: one charge, and the second turn was told "charge 1". Now both are refused, naming "key".
    expect(charges).toEqual([]);
    expect(JSON.stringify([first.told, second.told])).not.toMatch(/charge 1/);
    expect(JSON.stringify(second.told)).toMatch(/business key/);
    await store.close();
  });

  it('without the package, the same resumed session charges twice (the trap is real)', async () => {
    const { charges, sendPayment } = payments();
    api = await fakeMessagesApi(scripted([[pay('toolu_01A09q90qw90lq917835lq9')], [done], [pay('toolu_01A09q90qw90lq917835lq9')], [done]]));
    const options = () => ({ mcpServers: { pay: createSdkMcpServer({ name: 'pay', version: '1.0.0', tools: [sendPayment] }) }, allowedTools: [TOOL] });
    const first = await run('Pay order o-42', options());
    await run('Go on', { ...options(), resume: first.sessionId });
    expect(charges).toHaveLength(2);
  });

  it('a model that calls again under a new tool_use id, with a business key, gets the first result; other input under that key is refused', async () => {
    const store = new lib.SqliteStore({ path: tempDb() });
    const { charges, sendPayment } = payments();
    const tools = claude.idempotentTools([sendPayment], { store, scope: 'conversation-7', tools: { send_payment: { key: (input: { orderId: string }) => `order-${input.orderId}` } } });
    const server = createSdkMcpServer({ name: 'pay', version: '1.0.0', tools });
    api = await fakeMessagesApi(scripted([[pay('toolu_01A09q90qw90lq917835lq9')], [pay('toolu_02A09q90qw90lq917835lq9')], [pay('toolu_03A09q90qw90lq917835lq9', { orderId: 'o-42', cents: 5 })]]));
    const r = await run('Pay order o-42', { mcpServers: { pay: server }, allowedTools: [TOOL] });
    expect(r.result).toBe('Paid.');
    expect(charges).toEqual([{ orderId: 'o-42', cents: 1999 }]);
    const [second] = toolResults(api.requests[2]);
    const [first] = toolResults(api.requests[1]);
    expect(second.content).toEqual(first.content);
    const [third] = toolResults(api.requests[3]);
    expect(third.is_error).toBe(true);
    expect(String(third.content)).toMatch(/business key "order-o-42".*other input/);
    await store.close();
  });

  it('a thrown tool reaches the model as an isError result, as without the package, and runs again when re-sent', async () => {
    const store = new lib.SqliteStore({ path: tempDb() });
    let runs = 0;
    const flaky = tool('send_payment', 'Charge', { orderId: z.string(), cents: z.number() }, async () => {
      runs += 1;
      if (runs === 1) throw new Error('card processor unavailable');
      return { content: [{ type: 'text' as const, text: 'charged' }] };
    });
    const plain = tool('send_payment', 'Charge', { orderId: z.string(), cents: z.number() }, async () => {
      throw new Error('card processor unavailable');
    });
    // Without the package, first: what the model is told about a throw.
    api = await fakeMessagesApi(scripted([[pay('toolu_01A09q90qw90lq917835lq9')]]));
    await run('Pay', { mcpServers: { pay: createSdkMcpServer({ name: 'pay', tools: [plain] }) }, allowedTools: [TOOL] });
    const unguarded = toolResults(api.requests[1])[0];
    await api.close();
    api = await fakeMessagesApi(scripted([[pay('toolu_01A09q90qw90lq917835lq9')], [done], [pay('toolu_01A09q90qw90lq917835lq9')]]));
    const options = { mcpServers: { pay: createSdkMcpServer({ name: 'pay', tools: claude.idempotentTools([flaky], { store }) }) }, allowedTools: [TOOL] };
    const first = await run('Pay', options);
    expect(toolResults(api.requests[1])[0]).toEqual(unguarded);
    expect(unguarded.is_error).toBe(true);
    // Re-sent on resume after the failure: it runs again (a failure is not a result to replay).
    const resumed = await run('Go on', { ...options, resume: first.sessionId });
    expect(runs).toBe(2);
    expect(JSON.stringify(resumed.told)).toContain('charged');
    await store.close();
  });

  it('a slow tool: a second worker that resumes the session and re-sends the call while it runs joins it; one charge', async () => {
    const store = new lib.SqliteStore({ path: tempDb() });
    const { charges, sendPayment, gate } = payments();
    gate.hold = true;
    let waiting!: () => void;
    const joined = new Promise<void>((r) => (waiting = r));
    const onEvent = (e: { type: string }) => {
      if (e.type === 'in-flight') waiting();
    };
    const tools = claude.idempotentTools([sendPayment], { store, onEvent });
    // Each prompt gets a call of toolu_01A09q90qw90lq917835lq9 (on resume: the re-sent assistant message); anything after it, the answer.
    api = await fakeMessagesApi((r) => {
      const last = r.messages.at(-1);
      return toolResults(r).length === 0 && /Pay order o-42|Go on/.test(JSON.stringify(last?.content)) ? [pay('toolu_01A09q90qw90lq917835lq9')] : [done];
    });
    // One server per worker (an McpServer serves one connection at a time).
    const options = () => ({ mcpServers: { pay: createSdkMcpServer({ name: 'pay', version: '1.0.0', tools }) }, allowedTools: [TOOL] });
    let session!: (id: string) => void;
    const sessionId = new Promise<string>((r) => (session = r));
    const firstRun = run('Pay order o-42', options(), session);
    await gate.started;
    // The first run is still charging: a second worker resumes the session and the call is re-sent.
    const secondRun = run('Go on', { ...options(), resume: await sessionId });
    await joined; // it waits for the first run instead of charging again
    expect(charges).toHaveLength(0);
    gate.release();
    const [first, second] = await Promise.all([firstRun, secondRun]);
    expect(first.result).toBe('Paid.');
    expect(charges).toHaveLength(1);
    expect(second.told).toEqual(first.told);
    expect(JSON.stringify(second.told)).toContain('charge 1');
    await store.close();
  });

  for (const decision of ['approve', 'edit', 'deny'] as const) {
    it(`canUseTool ${decision}: the answer is bound to the tool call; re-asked on resume and submitted twice, it is the first answer`, async () => {
      const store = new lib.SqliteStore({ path: tempDb() });
      const { charges, sendPayment } = payments();
      const server = createSdkMcpServer({ name: 'pay', version: '1.0.0', tools: claude.idempotentTools([sendPayment], { store }) });
      let asks = 0;
      // The human's answers: the first one, then (a double submit, a second worker) another.
      const human = async (_name: string, input: Record<string, unknown>) => {
        asks += 1;
        if (asks > 1) return { behavior: 'allow' as const, updatedInput: { ...input, cents: 1 } };
        if (decision === 'approve') return { behavior: 'allow' as const, updatedInput: input };
        if (decision === 'edit') return { behavior: 'allow' as const, updatedInput: { ...input, cents: 1500 } };
        return { behavior: 'deny' as const, message: 'not this order' };
      };
      const guarded = claude.idempotentCanUseTool(human, { store });
      let runtimeAsked = 0;
      const canUseTool: typeof guarded = (...a) => ((runtimeAsked += 1), guarded(...a));
      api = await fakeMessagesApi(scripted([[pay('toolu_07A09q90qw90lq917835lq9')], [done], [pay('toolu_07A09q90qw90lq917835lq9')], [done]]));
      const options = { mcpServers: { pay: server }, canUseTool };
      const first = await run('Pay order o-42', options);
      // Submitted twice at once, as two workers would ask: one answer.
      const twice = await Promise.all([1, 2].map(() => canUseTool(TOOL, { orderId: 'o-42', cents: 1999 }, { signal: new AbortController().signal, toolUseID: 'toolu_07A09q90qw90lq917835lq9' })));
      expect(twice[0]).toEqual(twice[1]);
      const resumed = await run('Go on', { ...options, resume: first.sessionId });
      // The runtime asked again for the re-sent call; the human was asked once.
      expect(runtimeAsked).toBe(4);
      expect(asks).toBe(1);
      const want = { approve: [{ orderId: 'o-42', cents: 1999 }], edit: [{ orderId: 'o-42', cents: 1500 }], deny: [] }[decision];
      expect(charges).toEqual(want);
      if (decision === 'deny') {
        expect(JSON.stringify(resumed.told)).toContain('not this order');
        const records = await store.listRecords({});
        expect(records.some((r) => r.name === 'approval:rejected:send_payment')).toBe(true);
      }
      await store.close();
    });
  }

  it('an external MCP server in options.mcpServers runs behind idempotent-tools mcp, keyed by the tool_use id: a re-sent call replays, two calls with the same arguments both run', async () => {
    const dir = tempDir();
    const log = join(dir, 'count.log');
    const act = (id: string): Block => ({ type: 'tool_use', id, name: 'mcp__counting__act', input: { id: 'a' } });
    const mcpServers = claude.idempotentMcpServers(
      { counting: { command: process.execPath, args: [COUNTING], env: { ...(process.env as Record<string, string>), COUNT_LOG: log } } },
      { db: join(dir, 'proxy.db') },
    );
    expect((mcpServers.counting as { args: string[] }).args).toContain('--tool-call-id');
    api = await fakeMessagesApi(scripted([[act('toolu_01A09q90qw90lq917835lq9')], [done], [act('toolu_01A09q90qw90lq917835lq9')], [act('toolu_02A09q90qw90lq917835lq9')], [done]]));
    const options = { mcpServers, allowedTools: ['mcp__counting__act'] };
    const first = await run('Act', options);
    expect(count(log, 'start', 'a')).toBe(1);
    const resumed = await run('Go on', { ...options, resume: first.sessionId });
    // toolu_01A09q90qw90lq917835lq9 re-sent: replayed; toolu_02A09q90qw90lq917835lq9, the same arguments under a new id: a call of its own.
    expect(count(log, 'start', 'a')).toBe(2);
    expect(resumed.told[0]).toEqual(first.told[0]);
  });
});

describe('idempotent-tools/claude-agent-sdk: who and which call, without a "scope" (issue 36)', () => {
  const handlerOf = (options: Parameters<typeof claude.idempotentTools>[1] = {}) => {
    const charges: string[] = [];
    const t = tool('send_payment', 'Charge', { orderId: z.string() }, async ({ orderId }) => {
      charges.push(orderId);
      return { content: [{ type: 'text' as const, text: `charged ${orderId}` }] };
    });
    const [guarded] = claude.idempotentTools([t], { store: new lib.SqliteStore({ path: tempDb() }), ...options });
    const call = (id: string, orderId = 'o-1') => guarded.handler({ orderId }, { _meta: { 'claudecode/toolUseId': id } } as never);
    return { call, charges };
  };

  it("Anthropic's unique ids need no scope; a short random id needs one; a numbered id (a gateway that counts, restarting in every response) is refused even with one, naming \"key\"", async () => {
    const { call, charges } = handlerOf();
    await call('toolu_01A09q90qw90lq917835lq9');
    await call('toolu_01A09q90qw90lq917835lq9');
    expect(charges).toEqual(['o-1']);
    await expect(call('D681PevKs')).rejects.toMatchObject({ code: 'CANNOT_TELL', option: 'scope', message: expect.stringMatching(/not one a provider makes unique/) });
    await expect(call('toolu_01')).rejects.toMatchObject({ code: 'CANNOT_TELL', option: 'key', message: expect.stringMatching(/restarts in every response/) });
    const scoped = handlerOf({ scope: 'conversation-7' });
    await expect(scoped.call('toolu_01')).rejects.toMatchObject({ code: 'CANNOT_TELL', option: 'key' });
    await scoped.call('D681PevKs');
    const keyed = handlerOf({ scope: 'conversation-7', tools: { send_payment: { key: (input: { orderId: string }) => `order-${input.orderId}` } } });
    await keyed.call('toolu_01');
    await keyed.call('toolu_01');
    expect([charges, scoped.charges, keyed.charges]).toEqual([['o-1'], ['o-1'], ['o-1']]);
  });

  it('a business key without a scope is refused (it would hold across every conversation and tenant); with one, it holds within it', async () => {
    const keyed = { send_payment: { key: (input: { orderId: string }) => `order-${input.orderId}` } };
    const unscoped = handlerOf({ tools: keyed });
    await expect(unscoped.call('toolu_01A09q90qw90lq917835lq9')).rejects.toMatchObject({ code: 'CANNOT_TELL', option: 'scope', message: expect.stringMatching(/business key but no "scope"/) });
    expect(unscoped.charges).toEqual([]);
    const scoped = handlerOf({ tools: keyed, scope: 'tenant-a' });
    await scoped.call('toolu_01A09q90qw90lq917835lq9');
    await scoped.call('toolu_02A09q90qw90lq917835lq9');
    expect(scoped.charges).toEqual(['o-1']);
  });
});
