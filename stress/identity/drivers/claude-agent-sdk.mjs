// The identity harness's driver for the Claude Agent SDK (@anthropic-ai/claude-agent-sdk, the
// dev dependency): the real runtime (its native binary) against a scripted fake Messages API
// on 127.0.0.1, with the tool guarded by idempotentTools over tool() definitions in a
// createSdkMcpServer, and permission answers by idempotentCanUseTool.
//
// Each conversation is a chat worker: one runtime in streaming input mode, one user message
// per ask ('please pay': the same words every time), its session kept by the runtime. The
// fake API answers the ask's model steps with the scenario's tool_use blocks (ids Anthropic
// makes unique, toolu_ and 24 random characters, or ids a gateway numbers, toolu_01, toolu_02
// in every response), then text. A resend re-sends the ask's assistant message with its
// tool_use blocks (same ids, same input) in a new runtime: `resume` of the conversation's
// session, a fork of it (`forkSession`), or a second worker (its own store connection) that
// resumes it. The scope option, where a variant gives one, is the conversation's id: two
// conversations of two callers send the same numbered ids and the same arguments.
// `--control id|args` replaces the helper with controls.js.
//
// Each runtime takes about a second of CPU to start (an ask in a running one, a tenth of it),
// so the conversations' runtimes start together, before the first ask, and a run is one
// scenario per variant (`size`, below): a whole campaign, one seed with both controls, is
// about 65 s of CPU (9 scenarios, some 65 runtimes). With unique ids alone, the id control
// would be right: the conversations take the id styles in turn (`idCycle`) so that every
// scenario has numbered ones, and the id control is caught in each variant.

import * as sdk from '@anthropic-ai/claude-agent-sdk';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..', '..', '..');
const require = createRequire(import.meta.url);
const { receiptsIn } = require('../ledger.js');
const { controlled } = require('../controls.js');

const TOOL = 'mcp__pay__pay';
const MODEL = 'claude-sonnet-4-5';
/** A delivery that takes longer than this is a harness failure (a runtime that hangs), not a verdict. */
const DELIVERY_TIMEOUT_MS = 60_000;
const RESENDS = ['resume', 'fork', 'worker'];

// The conversations take the id styles in turn (idCycle): c1 (and c2) numbered, in every scenario.
const base = { kind: 'conversation', callers: 2, multiStep: true, parallel: true, resends: RESENDS, idCycle: true };
export const variants = [
  // No scope: Anthropic's unique ids need none; numbered ones (toolu_01, restarting in every
  // response) are refused, naming "key". Every call asked through canUseTool (approve, edit, deny).
  { name: 'unscoped', capabilities: { ...base, idStyles: ['restart', 'restart', 'unique'], approvals: ['approve', 'edit', 'reject'] } },
  // The conversation's id as the scope: Anthropic's ids run; ids numbered through a session
  // (toolu_01, toolu_02, ... in every conversation, which two conversations of two callers send
  // alike, with the same arguments) are refused, naming "key": a number tells no call from another.
  { name: 'scope', capabilities: { ...base, idStyles: ['counting', 'counting', 'unique'] } },
  // A business key (the order) within the conversation's scope, with ids that restart in every
  // response, and one malformed key among many: the key names each call.
  { name: 'business-key', capabilities: { ...base, idStyles: ['restart', 'restart', 'unique'], malformed: true } },
  // The conversation's id as the scope, with ids that restart in every response (a gateway that
  // numbers its calls), and approvals: this variant found a later step's or turn's toolu_01 with
  // the same input replayed from the first (and canUseTool answering it with the first decision);
  // such calls are now refused, naming "key".
  { name: 'scope-restarting', capabilities: { ...base, idStyles: ['restart'], approvals: ['approve', 'edit', 'reject'] } },
];

/** Scenarios per run (a runtime takes a second to start): what campaign.mjs runs unless told. */
export const size = { scenarios: 1, controlScenarios: 1 };

export const name = 'claude-agent-sdk';

/** The scenario's id of a call, as the API sends it: call_0 → toolu_01 (numbered), call_<24> → toolu_<24>. */
function toolUseId(id) {
  const numbered = /^call_(\d+)$/.exec(id);
  return numbered ? `toolu_${String(Number(numbered[1]) + 1).padStart(2, '0')}` : id.replace(/^call_/, 'toolu_');
}

/**
 * A fake Messages API: `POST /r/<runtime>/v1/messages`. A request that offers tools is a model
 * step, answered with `answer(runtime)` (tool_use blocks, or text); others (titles) with text.
 * Streamed as server-sent events in the Messages API's order.
 */
function fakeMessagesApi(answer) {
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const m = /^\/r\/([^/]+)\/v1\/messages/.exec(req.url ?? '');
    if (req.method !== 'POST' || m === null) {
      res.writeHead(404).end();
      return;
    }
    const json = JSON.parse(body);
    const offersTools = Array.isArray(json.tools) && json.tools.length > 0;
    const blocks = offersTools ? answer(m[1]) : [{ type: 'text', text: 'A title' }];
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
    send('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: json.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } });
    blocks.forEach((b, index) => {
      if (b.type === 'text') {
        send('content_block_start', { index, content_block: { type: 'text', text: '' } });
        send('content_block_delta', { index, delta: { type: 'text_delta', text: b.text } });
      } else {
        send('content_block_start', { index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
        send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } });
      }
      send('content_block_stop', { index });
    });
    send('message_delta', { delta: { stop_reason: blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } });
    send('message_stop', {});
    res.end();
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((done) => server.close(() => done())) })),
  );
}

/** The environment the runtime needs offline: the fake API (this runtime's path on it), a key, a HOME of the scenario's. */
function offlineEnv(url, home) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('ANTHROPIC_') && !k.startsWith('CLAUDE')) env[k] = v;
  // CLAUDE_CODE_SIMPLE (--bare): no hooks, plugins or CLAUDE.md to look for; a fifth less CPU at each start.
  return { ...env, HOME: home, ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: 'sk-ant-test', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1', CLAUDE_CODE_SIMPLE: '1' };
}

/**
 * The runtimes' processes, so that a scenario ends only when its runtimes have (they write
 * their sessions under the scenario's folder): `spawnClaudeCodeProcess` for query()'s options.
 */
function processes() {
  const spawned = [];
  return {
    spawn({ command, args, cwd, env, signal }) {
      const child = spawn(command, args, { cwd, env, signal, stdio: ['pipe', 'pipe', 'ignore'] });
      // A process that cannot start, or is aborted, has ended too; the query says why.
      const exited = new Promise((resolve) => {
        child.once('exit', resolve);
        child.on('error', resolve);
      });
      spawned.push({ child, exited });
      return child;
    },
    /** Waits for every process to end; one still there after `ms` is killed. */
    async ended(ms = 10_000) {
      const timer = setTimeout(() => spawned.forEach(({ child }) => child.exitCode === null && child.kill('SIGKILL')), ms);
      await Promise.all(spawned.map((p) => p.exited));
      clearTimeout(timer);
    },
  };
}

/** A runtime in streaming input mode: `turn(text)` sends a user message and reads to its result. */
function streamingRuntime(sdk, options) {
  const pending = [];
  let wake = null;
  let closed = false;
  async function* input() {
    for (;;) {
      while (pending.length === 0 && !closed) await new Promise((r) => (wake = r));
      if (closed) return;
      yield pending.shift();
    }
  }
  const q = sdk.query({ prompt: input(), options });
  const it = q[Symbol.asyncIterator]();
  let sessionId;
  return {
    get sessionId() {
      return sessionId;
    },
    async turn(text) {
      pending.push({ type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: sessionId ?? '' });
      wake?.();
      const messages = [];
      for (;;) {
        const { value, done } = await it.next();
        if (done) throw new Error('the runtime ended before the turn did');
        if (value.session_id) sessionId = value.session_id;
        messages.push(value);
        if (value.type === 'result') return messages;
      }
    },
    close() {
      closed = true;
      wake?.();
      q.close();
    },
  };
}

/** A one-shot query to its end (a resumed or forked session). */
async function oneShot(sdk, prompt, options) {
  const messages = [];
  for await (const m of sdk.query({ prompt, options })) messages.push(m);
  return messages;
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${DELIVERY_TIMEOUT_MS / 1000} s (the runtime hangs)`)), DELIVERY_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The tool results the runtime got, in order: [{ id, text, isError }]. */
function toolResultsIn(messages) {
  const out = [];
  for (const m of messages) {
    if (m.type !== 'user' || !Array.isArray(m.message?.content)) continue;
    for (const c of m.message.content) {
      if (c?.type !== 'tool_result') continue;
      const text = typeof c.content === 'string' ? c.content : Array.isArray(c.content) ? c.content.map((p) => (p?.type === 'text' ? p.text : JSON.stringify(p))).join('\n') : JSON.stringify(c.content ?? '');
      out.push({ id: c.tool_use_id, text, isError: c.is_error === true });
    }
  }
  return out;
}

/** What the caller was handed for each call of the delivery: its receipts, our refusal, a denial, or another error. */
function seenIn(messages, steps, approval) {
  const results = toolResultsIn(messages);
  const seen = [];
  for (const calls of steps) {
    for (const call of calls) {
      const at = results.findIndex((r) => r.id === call.id);
      const r = at === -1 ? undefined : results.splice(at, 1)[0];
      if (r === undefined) seen.push({ meant: call.meant, receipts: [], error: 'no result for the call' });
      else if (approval === 'reject') seen.push({ meant: call.meant, receipts: receiptsIn(r.text), refused: 'rejected' });
      else if (r.isError) seen.push({ meant: call.meant, receipts: receiptsIn(r.text), ...(r.text.includes('idempotent-tools') ? { refused: r.text.slice(0, 300) } : { error: r.text.slice(0, 300) }) });
      else seen.push({ meant: call.meant, receipts: receiptsIn(r.text) });
    }
  }
  return seen;
}

function emitted(steps) {
  return steps.flatMap((calls, step) => calls.map((c) => ({ meant: c.meant, toolCallId: c.id, args: c.args, step })));
}

/**
 * With a business key, each call of a conversation names its own order (a new call is a new
 * order): the conversation's first is o-1, its second o-2, so two conversations name the same
 * orders, which must stay two calls each. A malformed call keeps its order.
 */
function argsFor(call, businessKey, conv) {
  if (!businessKey || call.args.orderId.includes('\ud83d')) return call.args;
  conv.orders = (conv.orders ?? 0) + 1;
  return { ...call.args, orderId: `o-${conv.orders}` };
}

export function claudeAgentSdkDriver({ sdk, z, pkg, helper }) {
  async function run(scenario, { ledger, control, variant, dir }) {
    const businessKey = variant.name === 'business-key';
    const scoped = variant.name !== 'unscoped';
    const debug = process.env.IDENTITY_DEBUG ? (...a) => console.error(`${Date.now() - t0} ms`, ...a) : () => {};
    const t0 = Date.now();
    const asksPermission = variant.capabilities.approvals !== undefined;
    const dbPath = join(dir, 'store.db');
    const store = new pkg.SqliteStore({ path: dbPath });
    const home = mkdtempSync(join(dir, 'home-'));
    const children = processes();

    // The model: per runtime, the steps of the delivery it is making; each step's request
    // answers with that step's calls (the ledger learns the step first), then text.
    const scripts = new Map(); // runtime tag -> { delivery, steps, next }
    const api = await fakeMessagesApi((tag) => {
      const s = scripts.get(tag);
      if (s === undefined || s.next >= s.steps.length) return [{ type: 'text', text: 'done' }];
      const step = s.next++;
      ledger.setCurrent(s.delivery, step);
      return s.steps[step].map((c) => ({ type: 'tool_use', id: c.id, name: TOOL, input: c.args }));
    });

    // The human who answers permission asks: the delivery's approval for each of its calls.
    let answering = { approval: undefined, calls: [] };
    const human = async (_toolName, input, options) => {
      const call = answering.calls.find((c) => c.id === options.toolUseID);
      const approval = answering.flip ? 'approve' : answering.approval;
      if (approval === 'reject') return { behavior: 'deny', message: 'no' };
      if (approval === 'edit' && call !== undefined) return { behavior: 'allow', updatedInput: scenario.meant[call.meant].edited };
      return { behavior: 'allow', updatedInput: input };
    };

    // The side effect: a payment, its receipt in what the model gets.
    const pay = async (args, toolUseId) => {
      const receipt = ledger.record({ toolCallId: toolUseId ?? null, args });
      return { content: [{ type: 'text', text: JSON.stringify({ id: receipt, status: 'paid' }) }] };
    };
    const schema = { orderId: z.string(), cents: z.number() };
    const guardedControl = control === undefined ? undefined : controlled(control, pay, { idempotent: pkg.idempotent, store, name: 'pay' });

    /** The options of a runtime serving conversation `conv` for a worker on `workerStore`. */
    const optionsFor = (tag, conv, workerStore) => {
      let tools;
      if (control !== undefined) {
        tools = [sdk.tool('pay', 'Pay an order', schema, async (args, extra) => guardedControl(args, extra?._meta?.['claudecode/toolUseId']))];
      } else {
        tools = helper.idempotentTools([sdk.tool('pay', 'Pay an order', schema, async (args, extra) => pay(args, extra?._meta?.['claudecode/toolUseId']))], {
          store: workerStore,
          ...(scoped ? { scope: conv.id } : {}),
          ...(businessKey ? { tools: { pay: { key: (input) => `order-${input.orderId}` } } } : {}),
        });
      }
      const permissions = !asksPermission
        ? { allowedTools: [TOOL] }
        : { canUseTool: control !== undefined ? human : helper.idempotentCanUseTool(human, { store: workerStore, ...(scoped ? { scope: conv.id } : {}) }) };
      return {
        env: offlineEnv(`${api.url}/r/${tag}`, home),
        cwd: home,
        model: MODEL,
        tools: [],
        settingSources: [],
        mcpServers: { pay: sdk.createSdkMcpServer({ name: 'pay', version: '1.0.0', tools }) },
        ...permissions,
        spawnClaudeCodeProcess: children.spawn,
      };
    };

    // Each conversation's chat worker: its runtime starts now, before the first ask.
    const convs = new Map(scenario.conversations.map((c) => [c.id, { ...c }]));
    for (const conv of convs.values()) conv.runtime = streamingRuntime(sdk, optionsFor(conv.id, conv, store));

    const asked = new Map(); // delivery -> { conv, steps, approval }
    const deliveries = [];
    let runtimes = 0;
    try {
      for (const event of scenario.events) {
        debug(event.op, event.delivery, event.via ?? '', event.conv ?? event.of);
        if (event.op === 'trim' || event.op === 'refresh') continue; // the runtime keeps the session's history
        if (event.op === 'ask') {
          const conv = convs.get(event.conv);
          const steps = event.steps.map((calls) => calls.map((c) => ({ ...c, id: toolUseId(c.id), args: argsFor(c, businessKey, conv) })));
          // What the helper cannot tell, and refuses (docs/frameworks.md): a numbered tool_use id
          // (restarting or counting), scope or not, unless a business key names the call.
          if (control === undefined && !businessKey && (conv.style === 'restart' || conv.style === 'counting')) for (const call of steps.flat()) scenario.meant[call.meant].expect = 'refused';
          asked.set(event.delivery, { conv, steps, approval: event.approval });
          scripts.set(conv.id, { delivery: event.delivery, steps, next: 0 });
          answering = { approval: event.approval, calls: steps.flat() };
          ledger.setCurrent(event.delivery);
          const messages = await withTimeout(conv.runtime.turn('please pay'), `${event.delivery} (ask in ${conv.id})`);
          conv.session = conv.runtime.sessionId;
          deliveries.push({ delivery: event.delivery, emitted: emitted(steps), seen: seenIn(messages, steps, event.approval) });
          continue;
        }
        // resend: the ask's assistant message with its tool_use blocks, re-sent by a new runtime on the session.
        const { conv, steps, approval } = asked.get(event.of);
        const via = event.via ?? 'resume';
        const tag = `${conv.id}-${++runtimes}`;
        const workerStore = via === 'worker' && control === undefined ? new pkg.SqliteStore({ path: dbPath }) : store;
        scripts.set(tag, { delivery: event.delivery, steps, next: 0 });
        answering = { approval, flip: event.flip === true, calls: steps.flat() };
        ledger.setCurrent(event.delivery);
        const options = { ...optionsFor(tag, conv, workerStore), resume: conv.session, ...(via === 'fork' ? { forkSession: true } : {}) };
        try {
          const messages = await withTimeout(oneShot(sdk, 'go on', options), `${event.delivery} (${via} of ${event.of})`);
          deliveries.push({ delivery: event.delivery, emitted: emitted(steps), seen: seenIn(messages, steps, approval) });
        } finally {
          if (workerStore !== store) await workerStore.close();
        }
      }
    } finally {
      for (const conv of convs.values()) conv.runtime.close();
      await children.ended();
      await api.close();
      await store.close();
      debug('ended');
    }
    for (const d of deliveries) debug(d.delivery, JSON.stringify(d.seen));
    return deliveries;
  }

  return { name, variants, size, run };
}

// The SDK and zod from the repository's dev dependencies, the package as built in the
// repository (or in IDENTITY_PACKAGE_ROOT: another build, such as an older commit's).
const { z } = require('zod');
const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || ROOT;
const pkg = require(PACKAGE);
const helper = require(join(PACKAGE, 'dist', 'integrations', 'claude-agent-sdk.js'));
export const { run } = claudeAgentSdkDriver({ sdk, z, pkg, helper });
