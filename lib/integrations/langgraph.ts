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

import {
  type Json,
  type Scope,
  type ToolHelperOptions,
  describe,
  idOf,
  resolveScope,
  wrapToolCall,
} from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome } from './shared.js';

/** The parts of a LangChain `RunnableConfig` these helpers read. */
export interface LangGraphConfigLike {
  configurable?: { thread_id?: unknown; checkpoint_ns?: unknown };
  metadata?: { langgraph_step?: unknown };
  /** Set by `tool.invoke(toolCall)` (which is how ToolNode calls a tool). */
  toolCall?: { id?: unknown };
  /** Set by ToolNode's tool runtime. */
  toolCallId?: unknown;
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
 * `{ thread_id, checkpoint_ns, tool_call_id }` for a call inside a tool: the thread, the
 * checkpoint namespace with task ids stripped (so a tool in a subgraph differs from one in
 * the parent graph), and the id of the tool call, which is stored with the model's message
 * in the checkpoint and so survives interrupt/resume, node retries, crashes, replays and forks.
 */
export function toolCallContext(config: LangGraphConfigLike): { thread_id: string; checkpoint_ns: string; tool_call_id: string } {
  checkConfig(config, 'toolCallContext(config)');
  const tool_call_id = toolCallIdOfOrThrow(config, 'toolCallContext');
  const thread_id = threadIdOf(config, 'toolCallContext');
  const ns = config.configurable?.checkpoint_ns;
  return { thread_id, checkpoint_ns: typeof ns === 'string' ? stripTaskIds(ns) : '', tool_call_id };
}

export interface LangGraphToolOptions<I, R> extends ToolHelperOptions<I, R> {
  /**
   * The scope of the call, instead of the thread id: a JSON value, or a function of
   * `(input, config)`. Needed when the graph runs without a thread_id.
   */
  scope?: Scope<[I, LangGraphConfigLike]>;
}

/**
 * Wraps a LangChain `tool()` function `(input, config) => result`: the key comes from the
 * thread, the checkpoint namespace (without task ids), the tool call id and the input; the
 * config object is passed to `fn` but never serialized into the key. Calling it outside a
 * graph (no config, no tool call id, no thread_id and no `scope`) is a TypeError.
 */
export function idempotentTool<I, R>(
  fn: (input: I, config: LangGraphConfigLike) => R,
  options?: LangGraphToolOptions<I, R>,
): (input: I, config: LangGraphConfigLike) => Promise<Awaited<R>> {
  const { scope, ...rest } = options ?? {};
  return wrapToolCall<I, [LangGraphConfigLike], R>('langgraph', fn, rest, (input, [config]) => {
    checkConfig(config, 'the wrapped tool');
    const toolCallId = toolCallIdOfOrThrow(config, 'the wrapped tool');
    let scoped: Json;
    if (scope !== undefined) {
      scoped = resolveScope('langgraph', scope, [input, config], 'return a thread or run id from "scope".');
    } else {
      scoped = threadIdOf(config, 'the wrapped tool');
    }
    const ns = config.configurable?.checkpoint_ns;
    return {
      framework: 'langgraph',
      toolCallId,
      scope: { thread: scoped, checkpoint_ns: typeof ns === 'string' ? stripTaskIds(ns) : '' },
    };
  }) as (input: I, config: LangGraphConfigLike) => Promise<Awaited<R>>;
}
