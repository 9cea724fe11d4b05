/**
 * `idempotent-tools/langgraph`: keys for tools that LangGraph.js (and LangChain.js agents
 * built on it) call, from the `RunnableConfig` that reaches the tool. Imports nothing from
 * LangChain or LangGraph: it only reads the config object.
 *
 * ```ts
 * import { tool } from '@langchain/core/tools';
 * import { idempotentTool } from 'idempotent-tools/langgraph';
 *
 * const sendPayment = tool(
 *   idempotentTool(async function sendPayment({ orderId, cents }) { ... }),
 *   { name: 'send_payment', schema: z.object({ orderId: z.string(), cents: z.number() }) },
 * );
 * ```
 */

import { running } from '../core/call-context.js';
import { canonicalJson } from '../core/canonical.js';
import { hitlDecisions, refusalToolMessage } from './langchain-hitl.js';
import {
  type Json,
  type Scope,
  type ToolHelperOptions,
  type ToolIdentity,
  describe,
  idOf,
  resolveScope,
  wrapToolCall,
} from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome, ToolReconcileRequest, ToolReconcileAnswer } from './shared.js';

/** The parts of a LangChain `RunnableConfig` these helpers read. */
export interface LangGraphConfigLike {
  configurable?: { thread_id?: unknown; checkpoint_ns?: unknown; __pregel_scratchpad?: unknown };
  metadata?: { langgraph_step?: unknown };
  /** Set by `tool.invoke(toolCall)` (which is how ToolNode calls a tool). */
  toolCall?: { id?: unknown; name?: unknown; args?: unknown };
  /** Set by ToolNode's tool runtime. */
  toolCallId?: unknown;
  /** ToolNode's tool runtime: the state the node was invoked with. */
  state?: unknown;
  signal?: unknown;
}

const WHERE = 'idempotent-tools/langgraph';

function checkConfig(config: unknown, fn: string): asserts config is LangGraphConfigLike {
  if (config === null || typeof config !== 'object') {
    throw new TypeError(
      `${WHERE}: ${fn} needs the RunnableConfig that LangGraph passes to the tool or node (its second argument), ` +
        `not ${describe(config)}. Was the tool called by hand, outside a graph?`,
    );
  }
}

function threadIdOf(config: LangGraphConfigLike, fn: string): string {
  const threadId = idOf(config.configurable?.thread_id);
  if (threadId === undefined) {
    throw new TypeError(
      `${WHERE}: ${fn}: the config has no thread_id (configurable.thread_id is ${describe(config.configurable?.thread_id)}). ` +
        'Run the graph with a checkpointer and { configurable: { thread_id } }, or give idempotentTool() a "scope" option.',
    );
  }
  return threadId;
}

/**
 * The checkpoint namespace without its task ids: `agent:<uuid>|tools:<uuid>` becomes
 * `agent|tools`. The task ids change when a run is replayed or forked; the path of nodes does not.
 */
export function stripTaskIds(checkpointNs: string): string {
  return checkpointNs
    .split('|')
    .map((part) => {
      const end = part.indexOf(':');
      return end === -1 ? part : part.slice(0, end);
    })
    .join('|');
}

/** The tool call's id: `config.toolCall.id` (what ToolNode passes), else `config.toolCallId`. */
export function toolCallIdOf(config: LangGraphConfigLike): string | undefined {
  return idOf(config.toolCall?.id) ?? idOf(config.toolCallId);
}

function toolCallIdOfOrThrow(config: LangGraphConfigLike, fn: string): string {
  const id = toolCallIdOf(config);
  if (id === undefined) {
    throw new TypeError(
      `${WHERE}: ${fn}: the config carries no tool call id (config.toolCall.id); was the tool called by hand, outside a graph? ` +
        'Use the config that is the tool function\'s second argument (getConfig() does not carry the tool call), ' +
        'and let ToolNode or an agent call the tool, or call it yourself with tool.invoke({ id, name, args, type: "tool_call" }).',
    );
  }
  return id;
}

/**
 * The id of the AI message that holds this tool call, from the state the tools node was
 * invoked with (ToolNode's runtime `config.state`, else LangGraph's current task input).
 * It is stored in the checkpoint, so it is the same on resume, retry, replay and fork, and
 * it tells apart two turns whose tool calls got the same id (providers and local models
 * that restart ids at `call_0` every turn). The last such message wins: the newest turn.
 */
export function aiMessageIdOf(config: LangGraphConfigLike, toolCallId: string): string | undefined {
  const candidates: unknown[] = [config.state];
  try {
    const scratchpad = config.configurable?.__pregel_scratchpad as { currentTaskInput?: unknown } | undefined;
    candidates.push(scratchpad?.currentTaskInput);
  } catch {
    // not LangGraph's scratchpad: no turn id
  }
  for (const state of candidates) {
    const messages = Array.isArray(state) ? state : (state as { messages?: unknown } | null | undefined)?.messages;
    if (!Array.isArray(messages)) continue;
    for (let i = messages.length - 1; i >= 0; i--) {
      const m = messages[i] as { tool_calls?: unknown; id?: unknown } | null;
      if (m === null || typeof m !== 'object' || !Array.isArray(m.tool_calls)) continue;
      if (m.tool_calls.some((c: { id?: unknown } | null) => c !== null && typeof c === 'object' && c.id === toolCallId)) {
        return idOf(m.id);
      }
    }
  }
  return undefined;
}

/**
 * `{ thread_id, step }`: the original design's context. `step` defaults to
 * `config.metadata.langgraph_step`. Stable across interrupt/resume and node retries of the
 * same step, but NOT across a replay or fork from an earlier checkpoint (the step
 * numbers of the new branch differ) and it is shared by every tool call of the step:
 * prefer `toolCallContext` inside tools.
 */
export function threadStepContext(config: LangGraphConfigLike, step?: number | string): { thread_id: string; step: number | string } {
  checkConfig(config, 'threadStepContext(config, step?)');
  const thread_id = threadIdOf(config, 'threadStepContext');
  const s = step ?? config.metadata?.langgraph_step;
  if ((typeof s !== 'number' || !Number.isFinite(s)) && (typeof s !== 'string' || s === '')) {
    throw new TypeError(
      `${WHERE}: threadStepContext: no step given and the config has no metadata.langgraph_step (${describe(s)}). ` +
        'Pass the config LangGraph gave the node, or the step as the second argument.',
    );
  }
  return { thread_id, step: s };
}

/**
 * `{ thread_id, checkpoint_ns, tool_call_id, message_id? }` for a call inside a tool: the
 * thread, the checkpoint namespace with task ids stripped (so a tool in a subgraph differs
 * from one in the parent graph), the id of the tool call, and (when the tools node's state
 * holds it) the id of the AI message that made the call. Both ids are stored with the
 * model's message in the checkpoint and so survive interrupt/resume, node retries, crashes,
 * replays and forks; the message id tells apart turns whose tool call ids repeat.
 */
export function toolCallContext(config: LangGraphConfigLike): { thread_id: string; checkpoint_ns: string; tool_call_id: string; message_id?: string } {
  checkConfig(config, 'toolCallContext(config)');
  const tool_call_id = toolCallIdOfOrThrow(config, 'toolCallContext');
  const thread_id = threadIdOf(config, 'toolCallContext');
  const ns = config.configurable?.checkpoint_ns;
  const message_id = aiMessageIdOf(config, tool_call_id);
  const context = { thread_id, checkpoint_ns: typeof ns === 'string' ? stripTaskIds(ns) : '', tool_call_id };
  return message_id === undefined ? context : { ...context, message_id };
}

export interface LangGraphToolOptions<I, R> extends ToolHelperOptions<I, R> {
  /**
   * The scope of the call, instead of the thread id: a JSON value, or a function of
   * `(input, config)`. Needed when the graph runs without a thread_id.
   */
  scope?: Scope<[I, LangGraphConfigLike]>;
}

/** Names compared loosely: `send_payment`, `sendPayment` and `send-payment` are one name. */
function sameName(a: string, b: string): boolean {
  const norm = (s: string) => s.replace(/[^\p{L}\p{N}]/gu, '').toLowerCase();
  return norm(a) === norm(b);
}

/** The framework's args agree with the tool's (parsed) input: equal, or the input adds schema defaults. */
function argsAgree(args: unknown, input: unknown): boolean {
  try {
    if (canonicalJson(args) === canonicalJson(input)) return true;
    if (args === null || typeof args !== 'object' || Array.isArray(args) || input === null || typeof input !== 'object') return false;
    return Object.entries(args).every(([k, v]) => Object.prototype.hasOwnProperty.call(input, k) && canonicalJson(v) === canonicalJson((input as Record<string, unknown>)[k]));
  } catch {
    return false;
  }
}

/** Every key of the framework's args is a key of the input (a schema may change values, not names). */
function sameShape(args: unknown, input: unknown): boolean {
  if (args === null || typeof args !== 'object' || Array.isArray(args) || input === null || typeof input !== 'object') return false;
  return Object.keys(args).every((k) => Object.prototype.hasOwnProperty.call(input, k));
}

/**
 * Whether `config.toolCall` is this tool's own call. A nested `tool.invoke(args, config)`
 * passes the enclosing tool's config on, and with it the enclosing call's `toolCall`:
 * trusting it would give two identical inner calls one key. It is this tool's call when
 * it is not the enclosing wrapped call's, and its name matches this tool's (and its args,
 * when present, have the input's shape: a schema may transform values); otherwise only
 * when its args agree with the input value for value.
 */
function ownToolCall(config: LangGraphConfigLike, input: unknown, tool: ToolIdentity): boolean {
  const call = config.toolCall;
  if (call === null || typeof call !== 'object') return true; // nothing inherited to distrust
  const id = idOf(call.id);
  if (id !== undefined && tool.enclosing?.framework === 'langgraph' && tool.enclosing.toolCallId === id) return false;
  const argsPresent = call.args !== undefined;
  if (typeof call.name !== 'string' && !argsPresent) return true; // a bare { id }: nothing to tell it by
  if (tool.name !== '' && typeof call.name === 'string' && sameName(call.name, tool.name)) {
    // The schema may transform values (trim, lowercase, defaults): the shape must agree.
    return !argsPresent || argsAgree(call.args, input) || sameShape(call.args, input);
  }
  return argsPresent && argsAgree(call.args, input);
}

/**
 * Rebuilds what LangGraph expects from a stored result: a `Command` (with its `goto` and
 * `Send`s, so a replayed handoff still applies) and LangChain messages (a `ToolMessage`
 * with its id and status), from the JSON the first run stored.
 */
/** @internal */
export async function revive(value: unknown): Promise<unknown> {
  if (Array.isArray(value)) return Promise.all(value.map(revive));
  if (value === null || typeof value !== 'object') return value;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value; // a live object (the first run's)
  const o = value as Record<string, unknown>;
  if (o.lc === 1 && o.type === 'constructor' && Array.isArray(o.id)) {
    const { load } = require('@langchain/core/load') as { load: (text: string) => Promise<unknown> };
    return load(JSON.stringify(o));
  }
  const entries = await Promise.all(Object.entries(o).map(async ([k, v]) => [k, await revive(v)] as const));
  const plain = Object.fromEntries(entries) as Record<string, unknown>;
  if (plain.lg_name === 'Command' || plain.lg_name === 'Send') {
    const lg = require('@langchain/langgraph') as {
      Command: new (fields: Record<string, unknown>) => unknown;
      Send: new (node: unknown, args: unknown) => unknown;
    };
    if (plain.lg_name === 'Send') return new lg.Send(plain.node, plain.args);
    const { lg_name: _, ...fields } = plain;
    return new lg.Command(fields);
  }
  return plain;
}

/** A `Command` as JSON data (its own `toJSON` drops `graph`, which a handoff to the parent needs). */
/** @internal */
export function toStorable(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const o = value as Record<string, unknown>;
  if (Object.getPrototypeOf(o) === Object.prototype) return value;
  if (o.lg_name === 'Send') return { lg_name: 'Send', node: o.node, args: o.args };
  if (o.lg_name !== 'Command') return value;
  const out: Record<string, unknown> = { lg_name: 'Command' };
  for (const field of ['update', 'resume', 'graph'] as const) if (o[field] !== undefined) out[field] = o[field];
  if (o.goto !== undefined) out.goto = Array.isArray(o.goto) ? o.goto.map(toStorable) : toStorable(o.goto);
  return out;
}

/**
 * Wraps a LangChain `tool()` function `(input, config) => result`: the key comes from the
 * thread, the checkpoint namespace (without task ids), the AI message and tool call ids and
 * the input; the config object is passed to `fn` but never serialized into the key.
 * Calling it outside a graph (no config, no tool call id, no thread_id and no `scope`) is a
 * TypeError (and a process warning). A replayed `Command` or `ToolMessage` comes back as one.
 * A nested `tool.invoke(args, config)` with the enclosing tool's config runs as a step of
 * the enclosing wrapped call.
 */
export function idempotentTool<I, R>(
  fn: (input: I, config: LangGraphConfigLike) => R,
  options?: LangGraphToolOptions<I, R>,
): (input: I, config: LangGraphConfigLike) => Promise<Awaited<R>> {
  const { scope, ...rest } = options ?? {};
  return wrapToolCall<I, [LangGraphConfigLike], R>(
    {
      name: 'langgraph',
      generator: 'return-value',
      carriesToolName: true,
      revive,
      toStorable,
      nested: (input, [config], tool) => {
        if (config === null || typeof config !== 'object') return undefined;
        if (!ownToolCall(config, input, tool)) return idOf(config.toolCall?.id) ?? 'unknown id';
        // `tool.invoke(args)` inside a wrapped function, without a config: no tool call of its
        // own, but an enclosing call to be a step of.
        if (toolCallIdOf(config) === undefined && running.getStore() !== undefined) return 'none';
        return undefined;
      },
      identify: (input, [config]) => {
        checkConfig(config, 'idempotentTool()');
        const toolCallId = toolCallIdOfOrThrow(config, 'idempotentTool()');
        let scoped: Json;
        if (scope !== undefined) {
          scoped = resolveScope('langgraph', scope, [input, config], 'return a thread or run id from "scope".');
        } else {
          scoped = threadIdOf(config, 'idempotentTool()');
        }
        const ns = config.configurable?.checkpoint_ns;
        const toolName = typeof config.toolCall?.name === 'string' ? config.toolCall.name : undefined;
        const message = aiMessageIdOf(config, toolCallId) ?? null;
        return {
          framework: 'langgraph',
          toolCallId,
          toolName,
          signal: config.signal,
          scope: {
            thread: scoped,
            checkpoint_ns: typeof ns === 'string' ? stripTaskIds(ns) : '',
            message,
          },
          conversation: { thread: scoped, checkpoint_ns: typeof ns === 'string' ? stripTaskIds(ns) : '' },
          approvalScope: scoped,
          turn: message,
        };
      },
      approvals: {
        // humanInTheLoopMiddleware's decisions (createAgent), from the checkpoints of the branch that runs.
        reported: (_input, [config], site) => hitlDecisions(config.configurable as Record<string, unknown> | undefined, site.turn ?? null),
        refused: (refusal, _input, [config], site) =>
          refusalToolMessage(refusal, { id: site.toolCallId, name: site.toolName ?? (typeof config.toolCall?.name === 'string' ? config.toolCall.name : site.toolCallId) }),
      },
      toolNameOf: (_input, [config]) => (typeof config?.toolCall?.name === 'string' ? config.toolCall.name : undefined),
    },
    fn,
    rest as LangGraphToolOptions<I, R> & Record<string, unknown>,
  ) as (input: I, config: LangGraphConfigLike) => Promise<Awaited<R>>;
}

// The agent-wide install for LangChain's createAgent lives in ./langchain.ts; it is here too
// because LangGraph users look for it here.
export { idempotentToolsMiddleware } from './langchain.js';
export type { IdempotentToolsMiddleware, IdempotentToolsMiddlewareOptions, PerToolOptions, ToolCallRequestLike } from './langchain.js';
