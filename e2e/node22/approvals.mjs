// Approvals bound to one execution, end to end on Node 22 with the current frameworks
// (ai 7 with the call-site toolApproval, @openai/agents 0.20, Mastra 1.71), offline (scripted
// models) on temp SQLite files. Each case runs the plain tools first where that shows the
// trap (the control), then the guarded ones. Run by .ci/node22-e2e.sh.
import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { SqliteStore } from 'idempotent-tools';
import { idempotentTools as aiTools, recordApprovalResponses } from 'idempotent-tools/ai-sdk';
import { idempotentTools as agentsTools, rejectToolCall } from 'idempotent-tools/openai-agents';
import { idempotentTools as mastraTools } from 'idempotent-tools/mastra';
import { z } from 'zod';

const db = () => join(mkdtempSync(join(tmpdir(), 'e2e-approvals-')), 'store.db');
let failed = false;
function check(what, ok, detail = '') {
  failed ||= !ok;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? `: ${detail}` : ''}`);
}

// ---------------------------------------------------------------- ai 7 (toolApproval at the call site)
const { generateText, tool } = await import('ai');
const { MockLanguageModelV3 } = await import('ai/test');
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const aiModel = (inputs) => new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => prompt.at(-1).role === 'user'
    ? { content: inputs.map((input, i) => ({ type: 'tool-call', toolCallId: `call_${i}`, toolName: 'charge', input: JSON.stringify(input) })), finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] }
    : { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] },
});
function aiSetup(guarded) {
  const store = new SqliteStore({ path: db() });
  const charges = [];
  const raw = { charge: tool({ inputSchema: z.object({ cents: z.number() }), execute: async ({ cents }) => { charges.push(cents); return `charged ${cents}`; } }) };
  const tools = guarded ? aiTools(raw, { store, scope: (input, { context }) => context.chatId }) : raw;
  const call = (model, messages) => generateText({ model, tools, messages, toolsContext: { charge: { chatId: 'chat-7' } }, toolApproval: { charge: 'user-approval' } });
  return { store, charges, call };
}
async function aiApprove(call, model, history, answers) {
  const first = await call(model, history);
  const requests = first.content.filter((p) => p.type === 'tool-approval-request');
  const responses = requests.map((r, i) => ({ type: 'tool-approval-response', approvalId: r.approvalId, approved: answers[i], ...(answers[i] ? {} : { reason: 'too much' }) }));
  return { approved: [...history, ...first.response.messages, { role: 'tool', content: responses }], requests };
}
// ai 7: responseMessages holds the approved calls' results too (they run before the first step).
const aiErrors = (r) => r.responseMessages.filter((m) => m.role === 'tool').flatMap((m) => m.content).filter((p) => p.type === 'tool-result' && p.output.type === 'error-text').map((p) => p.output.value);

// A child of the two-process case below: submits the approved history it is given.
if (process.argv[2] === 'child') {
  const opts = JSON.parse(process.argv[3]);
  const store = new SqliteStore({ path: opts.db });
  const tools = aiTools({ charge: tool({ inputSchema: z.object({ cents: z.number() }), execute: async ({ cents }) => {
    appendFileSync(opts.log, `${cents} ${process.pid}\n`);
    console.log('RUNNING');
    await new Promise((resolve) => process.stdin.once('data', resolve)); // the parent's release
    return `charged ${cents}`;
  } }) }, { store, scope: 'chat-shared', onEvent: (e) => e.type === 'in-flight' && console.log('WAITING') });
  const r = await generateText({ model: aiModel([]), tools, messages: JSON.parse(readFileSync(opts.history, 'utf8')), toolApproval: { charge: 'user-approval' } });
  console.log(`RESULT ${JSON.stringify(r.responseMessages[0]?.content?.[0]?.output)}`);
  await store.close();
  process.exit(0);
}

for (const guarded of [false, true]) {
  const { charges, call, store } = aiSetup(guarded);
  const model = aiModel([{ cents: 100 }]);
  const { approved } = await aiApprove(call, model, [{ role: 'user', content: 'pay' }], [true]);
  await Promise.all([call(model, approved), call(model, approved)]);
  await call(model, approved);
  check(`ai 7: the approved history submitted three times (twice at once), ${guarded ? 'guarded' : 'plain'}`, charges.length === (guarded ? 1 : 3), `${charges.length} charge(s)`);
  await store.close();
}
for (const guarded of [false, true]) {
  const { charges, call, store } = aiSetup(guarded);
  const model = aiModel([{ cents: 100 }, { cents: 200 }]);
  const { approved } = await aiApprove(call, model, [{ role: 'user', content: 'pay both' }], [true, false]);
  await call(model, approved);
  const flipped = JSON.parse(JSON.stringify(approved).replace('"approved":false', '"approved":true'));
  const r = await call(model, flipped);
  const denied = charges.filter((c) => c === 200).length;
  check(`ai 7: a denial, then the history resubmitted with it approved, ${guarded ? 'guarded' : 'plain'}`, denied === (guarded ? 0 : 1), `the denied call ran ${denied} time(s)${guarded ? `; the model got: ${aiErrors(r)[0]?.slice(0, 90)}` : ''}`);
  await store.close();
}
{
  const { charges, call, store } = aiSetup(true);
  const model = aiModel([{ cents: 100 }]);
  const { approved } = await aiApprove(call, model, [{ role: 'user', content: 'pay' }], [true]);
  await call(model, approved);
  const edited = JSON.parse(JSON.stringify(approved).split('"cents":100').join('"cents":900'));
  let refusedBy = '';
  try {
    refusedBy = aiErrors(await call(model, edited))[0] ?? '';
  } catch (err) {
    refusedBy = `ai 7 itself: ${err.name}`; // ai 7 may refuse a history whose input no longer matches the approval
  }
  check('ai 7: the approved history resubmitted with other input', charges.length === 1 && refusedBy !== '', `${charges.length} charge(s); refused by ${refusedBy.slice(0, 110)}`);
  await store.close();
}
{
  const { charges, call, store } = aiSetup(true);
  const model = aiModel([{ cents: 100 }]);
  const t1 = await aiApprove(call, model, [{ role: 'user', content: 'pay' }], [true]);
  const r1 = await call(model, t1.approved);
  const t2 = await aiApprove(call, model, [...t1.approved, ...r1.responseMessages, { role: 'user', content: 'pay again' }], [true]);
  await call(model, t2.approved);
  await call(model, t2.approved);
  check('ai 7: call_0 reused in the next turn after an approval', charges.length === 2, `${charges.length} charge(s) (want 2: one per turn)`);
  await store.close();
}

{
  // Chats cap their history: the same approved call, resubmitted with the oldest messages dropped.
  const { charges, call, store } = aiSetup(true);
  const model = aiModel([{ cents: 100 }]);
  const earlier = [{ role: 'user', content: 'hello' }, { role: 'assistant', content: [{ type: 'text', text: 'hi' }] }];
  const { approved } = await aiApprove(call, model, [...earlier, { role: 'user', content: 'pay' }], [true]);
  await call(model, approved);
  await call(model, approved.slice(2));
  await call(model, approved.slice(-2));
  check('ai 7: the approved history resubmitted with its oldest messages dropped', charges.length === 1, `${charges.length} charge(s)`);
  await store.close();
}
for (const withLine of [false, true]) {
  // A lone denial: nothing of its request runs. The route's one line records it; the flipped resubmission then never runs.
  const { charges, call, store } = aiSetup(true);
  const model = aiModel([{ cents: 100 }]);
  const route = async (messages) => {
    if (withLine) await recordApprovalResponses(messages, { scope: 'chat-7', store });
    return call(model, messages);
  };
  const first = await route([{ role: 'user', content: 'pay' }]);
  const [request] = first.content.filter((p) => p.type === 'tool-approval-request');
  const denied = [{ role: 'user', content: 'pay' }, ...first.response.messages, { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved: false, reason: 'no' }] }];
  await route(denied);
  await route(JSON.parse(JSON.stringify(denied).replace('"approved":false', '"approved":true')));
  check(`ai 7: a lone denial, then the request flipped to approved, ${withLine ? 'with recordApprovalResponses in the route' : 'without the route\'s line (the control)'}`, charges.length === (withLine ? 0 : 1), `${charges.length} charge(s)`);
  await store.close();
}

// ---------------------------------------------------------------- @openai/agents 0.20
const { Agent, RunState, Runner, Usage, setTracingDisabled, tool: agentTool } = await import('@openai/agents');
setTracingDisabled(true);
function agentsSetup(guarded) {
  const store = new SqliteStore({ path: db() });
  const charges = [];
  let responses = 0;
  const model = {
    async getResponse(request) {
      responses++;
      const answered = Array.isArray(request.input) && request.input.at(-1)?.type === 'function_call_result';
      return { usage: new Usage(), output: answered
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }]
        : [{ type: 'function_call', id: `fc_${responses}`, callId: 'call_0', name: 'charge', arguments: JSON.stringify({ cents: 100 }), status: 'completed' }] };
    },
    async *getStreamedResponse() { throw new Error('not used'); },
  };
  const charge = agentTool({ name: 'charge', description: 'charge', parameters: z.object({ cents: z.number() }), needsApproval: true, execute: async ({ cents }) => { charges.push(cents); return `charged ${cents}`; } });
  const agent = new Agent({ name: 'payer', model, tools: guarded ? agentsTools([charge], { store, scope: (input, rc) => rc.context.chat }) : [charge] });
  return { store, charges, agent, runner: new Runner() };
}
for (const guarded of [false, true]) {
  const { charges, agent, runner, store } = agentsSetup(guarded);
  const first = await runner.run(agent, 'pay', { context: { chat: 'chat-1' } });
  for (const item of first.interruptions) first.state.approve(item);
  const saved = first.state.toString();
  await Promise.all([runner.run(agent, await RunState.fromString(agent, saved)), runner.run(agent, await RunState.fromString(agent, saved))]);
  check(`@openai/agents 0.20: one saved approved run resumed twice at once, ${guarded ? 'guarded' : 'plain'}`, charges.length === (guarded ? 1 : 2), `${charges.length} charge(s)`);
  if (guarded) {
    const edited = saved.split(JSON.stringify(JSON.stringify({ cents: 100 }))).join(JSON.stringify(JSON.stringify({ cents: 900 })));
    let refusedBy;
    try {
      const r = await runner.run(agent, await RunState.fromString(agent, edited));
      refusedBy = r.newItems.filter((i) => i.type === 'tool_call_output_item').map((i) => String(i.output))[0];
    } catch (err) {
      refusedBy = `@openai/agents itself: ${err.message}`; // 0.20 checks a resumed approval's arguments too
    }
    check('@openai/agents 0.20: the saved run with other arguments under the approval', charges.length === 1 && /approved for other arguments|reused for a different invocation/.test(refusedBy ?? ''), `refused by ${refusedBy?.slice(0, 110)}`);
  }
  await store.close();
}
{
  const { charges, agent, runner, store } = agentsSetup(true);
  const first = await runner.run(agent, 'pay', { context: { chat: 'chat-1' } });
  const before = first.state.toString();
  const [item] = first.interruptions;
  await rejectToolCall(first.state, item, { scope: (input, rc) => rc.context.chat, store, message: 'not this month' });
  await runner.run(agent, first.state);
  const again = await RunState.fromString(agent, before);
  for (const i of again.getInterruptions()) again.approve(i);
  await runner.run(agent, again);
  check('@openai/agents 0.20: a rejection (rejectToolCall instead of state.reject), then the run saved before it approved', charges.length === 0, `${charges.length} charge(s)`);
  await store.close();
}
// Chat Completions models: the item id is the response's (chatcmpl-…), a placeholder, or none; call ids restart every turn.
for (const [kind, itemId] of [['chatcmpl response ids', (n) => `chatcmpl-${n}`], ['FAKE_ID', () => 'FAKE_ID'], ['no item id', () => undefined]]) {
  const store = new SqliteStore({ path: db() });
  const charges = [];
  let responses = 0;
  const cents = [100, 200, 100];
  const model = {
    async getResponse(request) {
      const items = typeof request.input === 'string' ? [{ role: 'user' }] : request.input;
      const turn = items.filter((i) => i.role === 'user').length;
      const id = itemId(++responses);
      return { usage: new Usage(), output: items.at(-1)?.type === 'function_call_result'
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }]
        : [{ type: 'function_call', ...(id === undefined ? {} : { id }), callId: 'call_0', name: 'charge', arguments: JSON.stringify({ cents: cents[turn - 1] }), status: 'completed' }] };
    },
    async *getStreamedResponse() { throw new Error('not used'); },
  };
  const charge = agentTool({ name: 'charge', description: 'charge', parameters: z.object({ cents: z.number() }), needsApproval: true, execute: async ({ cents: c }) => { charges.push(c); return `charged ${c} (#${charges.length})`; } });
  const agent = new Agent({ name: 'payer', model, tools: agentsTools([charge], { store, scope: (input, rc) => rc.context.conversationId }) });
  const runner = new Runner();
  let history = [];
  const got = [];
  for (const said of ['pay 100', 'pay 200', 'pay 100 again']) {
    const asked = await runner.run(agent, [...history, { role: 'user', content: said }], { context: { conversationId: 'conv-7' } });
    for (const item of asked.interruptions) asked.state.approve(item);
    const saved = asked.state.toString();
    await runner.run(agent, await RunState.fromString(agent, saved)); // resumed from its string, twice
    const done = await runner.run(agent, await RunState.fromString(agent, saved));
    got.push(...done.newItems.filter((i) => i.type === 'tool_call_output_item').map((i) => String(i.output)));
    history = done.history;
  }
  // Without item ids, turn 3's second resume could as well be turn 1's saved run resumed again
  // (call_0, 100 cents, both run): nothing the tool is given tells which, so it is refused,
  // never handed the other turn's payment (issue 36). With response ids it is replayed.
  const third = kind.startsWith('chatcmpl') ? got[2] === 'charged 100 (#3)' : /CannotTellError: .*could be either of several calls/s.test(got[2] ?? '');
  check(`@openai/agents 0.20, Chat Completions (${kind}): three turns of call_0 (100, 200, 100), each resumed twice`, charges.join() === '100,200,100' && got.slice(0, 2).join() === 'charged 100 (#1),charged 200 (#2)' && third, `charges ${charges.join()}; the model got ${got.join(' / ')}`);
  await store.close();
}

// ---------------------------------------------------------------- Mastra 1.71
const { Agent: MastraAgent } = await import('@mastra/core/agent');
const { Mastra } = await import('@mastra/core/mastra');
const { createTool } = await import('@mastra/core/tools');
const mastraUsage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };
function mastraModel() {
  return {
    specificationVersion: 'v2', provider: 'scripted', modelId: 'scripted', supportedUrls: {},
    async doGenerate() { throw new Error('this test streams'); },
    async doStream({ prompt }) {
      const parts = prompt.at(-1).role === 'user'
        ? [{ type: 'stream-start', warnings: [] }, { type: 'tool-call', toolCallId: 'call_0', toolName: 'charge', input: JSON.stringify({ cents: 100 }) }, { type: 'finish', finishReason: 'tool-calls', usage: mastraUsage }]
        : [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'done' }, { type: 'text-end', id: 't' }, { type: 'finish', finishReason: 'stop', usage: mastraUsage }];
      return { stream: new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }) };
    },
  };
}
const drain = async (promise) => {
  try {
    for await (const _ of (await promise).fullStream);
  } catch {
    // Mastra refused the answer (the run had moved on)
  }
};
for (const guarded of [false, true]) {
  const store = new SqliteStore({ path: db() });
  const charges = [];
  const raw = { charge: createTool({ id: 'charge', description: 'charge', inputSchema: z.object({ cents: z.number() }), requireApproval: true, execute: async ({ cents }) => { charges.push(cents); return `charged ${cents}`; } }) };
  const agent = new MastraAgent({ id: 'payer', name: 'payer', instructions: 'pay', model: mastraModel(), tools: guarded ? mastraTools(raw, { store, scope: 'conversation-1' }) : raw });
  new Mastra({ agents: { payer: agent }, logger: false });
  const out = await agent.stream('pay');
  for await (const _ of out.fullStream);
  await Promise.all([drain(agent.approveToolCall({ runId: out.runId })), drain(agent.approveToolCall({ runId: out.runId }))]);
  check(`Mastra: two approveToolCall at once (mastra#24590), ${guarded ? 'guarded' : 'plain'}`, charges.length === (guarded ? 1 : charges.length), `${charges.length} charge(s)${guarded ? '' : ' (the control)'}`);
  await store.close();
}

// ---------------------------------------------------------------- two processes, one approved ai 7 history, one SQLite file
{
  const dir = mkdtempSync(join(tmpdir(), 'e2e-approvals-race-'));
  const opts = { db: join(dir, 'store.db'), log: join(dir, 'charges.log'), history: join(dir, 'history.json') };
  const { call } = aiSetup(true);
  const { approved } = await aiApprove(call, aiModel([{ cents: 500 }]), [{ role: 'user', content: 'pay' }], [true]);
  writeFileSync(opts.history, JSON.stringify(approved));
  const self = fileURLToPath(import.meta.url);
  const children = [0, 1].map(() => spawn(process.execPath, [self, 'child', JSON.stringify(opts)], { stdio: ['pipe', 'pipe', 'inherit'] }));
  // Either child may claim first: whichever says RUNNING holds the call, and the other must
  // say WAITING (it found the call in flight) before the runner is released. If the other
  // runs the tool too (the fault this checks for), it says RUNNING: every runner is
  // released and the check below fails on two charges, instead of waiting forever. Every
  // byte is collected from spawn on, so nothing said before a wait began is missed.
  const outs = ['', ''];
  let changed = () => {};
  const ended = children.map((c, i) => new Promise((resolve) => {
    c.stdout.on('data', (d) => { outs[i] += d; changed(); });
    c.on('close', (code) => { outs[i] += `\nEXIT ${code}\n`; changed(); resolve(); });
  }));
  const until = (test) => new Promise((resolve) => { changed = () => test() && resolve(); changed(); });
  const said = (i, ...words) => words.some((w) => outs[i].includes(w));
  await until(() => said(0, 'RUNNING', 'EXIT') || said(1, 'RUNNING', 'EXIT'));
  const first = said(0, 'RUNNING') ? 0 : 1;
  await until(() => said(1 - first, 'WAITING', 'RUNNING', 'EXIT'));
  // From here on, every child that is running the tool (now or later) is released.
  const released = new Set();
  changed = () => children.forEach((c, i) => { if (said(i, 'RUNNING') && !released.has(i)) { released.add(i); c.stdin.end('release\n'); } });
  changed();
  await Promise.all(ended);
  const charges = readFileSync(opts.log, 'utf8').split('\n').filter(Boolean);
  const results = outs.map((o) => o.split('RESULT ')[1]?.split('\n')[0].trim());
  check('ai 7: two processes submit one approved history on one SQLite file', charges.length === 1 && results[0] !== undefined && results[0] === results[1], `${charges.length} charge(s); results ${results.join(' / ')}`);
}

console.log(failed ? 'approvals e2e: FAILED' : 'approvals e2e: ok');
process.exit(failed ? 1 : 0);
