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
import { isNumberedCallId, unknownMessage } from './identity.js';
import { hitlDecisions, refusalToolMessage } from './langchain-hitl.js';
import { type LangGraphConfigLike, aiMessageIdOf, revive, stripTaskIds, toStorable } from './langgraph-state.js';
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
export type { LangGraphConfigLike };
export { aiMessageIdOf, stripTaskIds } from './langgraph-state.js';
/** @internal */
export { revive, toStorable } from './langgraph-state.js';

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
  // A numbered id (call_0) with no AI message to tell its turn: a later turn's call would be this one.
  if (message_id === undefined && isNumberedCallId(tool_call_id)) throw unknownMessage('idempotent-tools/langgraph: toolCallContext(config)', tool_call_id);
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
          ...(message === null && isNumberedCallId(toolCallId) ? { turnUnknown: unknownMessage('idempotent-tools/langgraph', toolCallId) } : {}),
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
