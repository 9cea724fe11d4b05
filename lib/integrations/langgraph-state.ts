/**
 * What LangGraph leaves in the objects it hands a tool, read the same way by the per-tool
 * helper (langgraph.ts) and the agent middleware (langchain.ts): the config's shape, the
 * checkpoint namespace without task ids, the AI message that made a call, and how a
 * stored `Command` or message becomes one again. Imports nothing from LangChain at load
 * time (`@langchain/core` and `@langchain/langgraph` are required when a result is revived).
 */

import { idOf } from './shared.js';

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
