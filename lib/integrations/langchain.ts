/**
 * `idempotent-tools/langchain` (also exported from `idempotent-tools/langgraph`): one
 * middleware for LangChain 1.x `createAgent({ middleware })` that guards every tool call of
 * the agent, keyed as `idempotentTool` keys it: the thread, the checkpoint namespace without
 * task ids, the id of the AI message that made the call, the tool call id and the arguments.
 *
 * ```ts
 * import { createAgent } from 'langchain';
 * import { idempotentToolsMiddleware } from 'idempotent-tools/langchain';
 *
 * const agent = createAgent({ model, tools, checkpointer, middleware: [idempotentToolsMiddleware()] });
 * ```
 *
 * Where the guard sits: around the tool itself (the middleware hands the rest of the chain a
 * guarded copy of `request.tool`), so a retry middleware anywhere in the list retries
 * through the guard, and each attempt joins the first one's record. Imports nothing from
 * LangChain at load time; `langchain` and `@langchain/core` are required when first used.
 */

import { classifyThrown } from '../core/control-flow.js';
import { defaultStore } from '../core/default-store.js';
import { type IdempotencyEvent, publish } from '../core/events.js';
import type { Store } from '../core/store.js';
import { recordReported } from './approval-guard.js';
import { isNumberedCallId, unknownMessage } from './identity.js';
import { hitlDecisions, refusalToolMessage, rejectedCallsMessage } from './langchain-hitl.js';
import { aiMessageIdOf, revive, stripTaskIds, toStorable } from './langgraph-state.js';
import {
  type Json,
  type Scope,
  type ToolHelperOptions,
  describe,
  idOf,
  resolveScope,
  scopeLabel,
  wrapToolCall,
} from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome, ToolReconcileRequest, ToolReconcileAnswer } from './shared.js';

/** The parts of LangChain's `ToolCallRequest` the middleware reads. */
export interface ToolCallRequestLike {
  toolCall: { id?: string; name: string; args: unknown };
  /** The registered tool; undefined for tools a middleware registers dynamically. */
  tool?: { name?: string; invoke: (input: unknown, config?: unknown) => Promise<unknown> } | undefined;
  state?: { messages?: unknown[] } & Record<string, unknown>;
  runtime?: { configurable?: { thread_id?: unknown; checkpoint_ns?: unknown }; signal?: unknown } & Record<string, unknown>;
}

type Handler = (request: ToolCallRequestLike) => Promise<unknown>;

/** Options of one tool (over the middleware's own): `guard: false` leaves it unguarded. */
export interface PerToolOptions extends ToolHelperOptions<any, unknown> {
  guard?: boolean;
}

export interface IdempotentToolsMiddlewareOptions extends Omit<ToolHelperOptions<any, unknown>, 'name'> {
  /**
   * The scope of the calls, instead of the thread id: a JSON value, or a function of
   * `(args, request)`. Needed when the agent runs without a thread_id.
   */
  scope?: Scope<[any, ToolCallRequestLike]>;
  /** Options per tool name (a business `key`, a `payload`, ...), or `false` to leave a tool unguarded. */
  tools?: Record<string, PerToolOptions | false>;
  /** Tools without side effects (search, lookups): not guarded, so a retry middleware retries them as before. */
  readOnly?: string[];
  /**
   * What a tool's error becomes: `'message'` (the default) the error ToolMessage the model
   * sees without any middleware (`Error: ...\n Please fix your mistakes.`); `'throw'` lets it
   * fail `agent.invoke`, which is what LangChain does once any `wrapToolCall` middleware is present.
   */
  toolErrors?: 'message' | 'throw';
}

/**
 * What `idempotentToolsMiddleware()` returns: an agent middleware (what `createMiddleware`
 * makes), typed by its shape so that this package's types need no LangChain types.
 */
export interface IdempotentToolsMiddleware {
  name: string;
  wrapToolCall: (request: any, handler: any) => Promise<any>;
  wrapModelCall: (request: any, handler: any) => Promise<any>;
}

const WHERE = 'idempotent-tools/langchain';
const RETRYABLE = Symbol.for('langchain.errors.retryable');

/** The framework arguments the guard hands the core: what to run, and the request it belongs to. */
interface Invocation {
  request: ToolCallRequestLike;
  run: () => Promise<unknown>;
  signal?: unknown;
}

/**
 * Marks `err` not retryable for LangChain's `toolRetryMiddleware` (its default `retryOn` is
 * `getRetryable(e) ?? true`), unless the tool marked it itself: a guarded tool that threw
 * may have had its effect, and our own errors (key mismatch, outcome unknown) do not get
 * better by trying again. A tool that knows an error had no effect says so with
 * `stampRetryable(err, true)`.
 */
function stampNotRetryable(err: unknown): void {
  if (err === null || typeof err !== 'object') return;
  if (Object.getOwnPropertyDescriptor(err, RETRYABLE) !== undefined) return;
  const name = (err as { name?: unknown }).name;
  // The tool did not run: the arguments did not parse. Retrying them is the model's job anyway.
  if (name === 'ToolInputParsingException' || name === 'ToolInvocationError') return;
  if (classifyThrown(err) === 'control-flow') return;
  try {
    const core = require('@langchain/core/errors') as { stampRetryable?: (e: unknown, r: boolean) => unknown };
    if (typeof core.stampRetryable === 'function') {
      core.stampRetryable(err, false);
      return;
    }
  } catch {
    // an older @langchain/core: the same mark by hand (a registered symbol)
  }
  try {
    Object.defineProperty(err, RETRYABLE, { value: false, configurable: true });
  } catch {
    // a frozen error: nothing to mark
  }
}

/** An error ToolNode hands on to its own handling (an interrupt, the schema-parse error, an abort). */
function passesThrough(err: unknown, request: ToolCallRequestLike): boolean {
  if (classifyThrown(err) === 'control-flow') return true;
  const signal = request.runtime?.signal as { aborted?: unknown } | undefined;
  if (signal !== null && typeof signal === 'object' && signal.aborted === true) return true;
  for (let e: unknown = err, depth = 0; e !== null && typeof e === 'object' && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { name?: unknown }).name === 'ToolInvocationError') return true;
  }
  return false;
}

/** What ToolNode makes of a tool error when no `wrapToolCall` middleware is present (`defaultHandleToolErrors`). */
function errorToolMessage(err: unknown, request: ToolCallRequestLike): unknown {
  const { ToolMessage } = require('@langchain/core/messages') as { ToolMessage: new (fields: Record<string, unknown>) => unknown };
  return new ToolMessage({
    content: `${err}\n Please fix your mistakes.`,
    tool_call_id: request.toolCall.id,
    name: request.toolCall.name,
    status: 'error',
  });
}

/**
 * A replay under a business key answers a call with another id than the first: the stored
 * ToolMessage (also one inside a Command's `update.messages`) is rebuilt for this call, with
 * this call's `tool_call_id` and no message id (the first call's message is in the state
 * already, and a message with its id would replace it).
 */
function forThisCall(result: unknown, toolCallId: string | undefined): unknown {
  if (toolCallId === undefined || result === null || typeof result !== 'object') return result;
  const { ToolMessage } = require('@langchain/core/messages') as {
    ToolMessage: { new (fields: Record<string, unknown>): unknown; isInstance(m: unknown): boolean };
  };
  const rebind = (m: unknown): unknown => {
    if (!ToolMessage.isInstance(m)) return m;
    const t = m as { tool_call_id?: string; content: unknown; name?: string; status?: string; artifact?: unknown; additional_kwargs?: unknown; response_metadata?: unknown };
    if (t.tool_call_id === toolCallId) return m;
    return new ToolMessage({
      content: t.content,
      tool_call_id: toolCallId,
      name: t.name,
      status: t.status,
      artifact: t.artifact,
      additional_kwargs: t.additional_kwargs,
      response_metadata: t.response_metadata,
    });
  };
  if (ToolMessage.isInstance(result)) return rebind(result);
  const command = result as { lg_name?: unknown; update?: { messages?: unknown } };
  if (command.lg_name === 'Command' && command.update !== null && typeof command.update === 'object' && Array.isArray(command.update.messages)) {
    const messages = command.update.messages as unknown[];
    const own = messages.some((m) => ToolMessage.isInstance(m) && (m as { tool_call_id?: string }).tool_call_id === toolCallId);
    if (!own) command.update.messages = messages.map(rebind);
  }
  return result;
}

function isToolCall(input: unknown): input is { id?: string; name?: string; args: unknown; type: 'tool_call' } {
  return input !== null && typeof input === 'object' && (input as { type?: unknown }).type === 'tool_call' && 'args' in input;
}

/**
 * `idempotentToolsMiddleware(options?)`: a LangChain agent middleware (`createMiddleware`
 * with a `wrapToolCall` hook) that guards every tool call of the agent. A repeated call (a
 * resume, a replay or fork from a checkpoint, a retry) returns the first call's stored
 * ToolMessage or Command; a call whose first run still goes waits for it. Put it first in
 * `middleware` (any order works: the guard sits around the tool itself).
 */
export function idempotentToolsMiddleware(options?: IdempotentToolsMiddlewareOptions): IdempotentToolsMiddleware {
  const o = (options ?? {}) as IdempotentToolsMiddlewareOptions & Record<string, unknown>;
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new TypeError(`${WHERE}: idempotentToolsMiddleware(options): options must be an object, not ${describe(o)}`);
  const { scope, tools: perTool = {}, readOnly = [], toolErrors = 'message', ...defaults } = o;
  if ('name' in defaults) {
    throw new TypeError(`${WHERE}: option "name" is not taken by idempotentToolsMiddleware(): each tool's records are named after the tool (the name the model calls).`);
  }
  if (perTool === null || typeof perTool !== 'object' || Array.isArray(perTool)) {
    throw new TypeError(`${WHERE}: option "tools" must be an object of tool names to options (or false), not ${describe(perTool)}`);
  }
  if (!Array.isArray(readOnly) || readOnly.some((n) => typeof n !== 'string')) {
    throw new TypeError(`${WHERE}: option "readOnly" must be an array of tool names, not ${describe(readOnly)}`);
  }
  if (toolErrors !== 'message' && toolErrors !== 'throw') {
    throw new TypeError(`${WHERE}: option "toolErrors" must be "message" or "throw", not ${describe(toolErrors)}`);
  }
  const skipped = new Set(readOnly);
  for (const [name, entry] of Object.entries(perTool)) {
    if (entry !== false && (entry === null || typeof entry !== 'object' || Array.isArray(entry))) {
      throw new TypeError(`${WHERE}: tools["${name}"] must be an object of options or false, not ${describe(entry)}`);
    }
    if (entry === false || entry.guard === false) skipped.add(name);
    else if (entry.guard !== undefined && entry.guard !== true) {
      throw new TypeError(`${WHERE}: tools["${name}"].guard must be true or false, not ${describe(entry.guard)}`);
    }
  }

  /** The thread of a call: the "scope" option's value, else the run's thread id (a TypeError that says what to pass). */
  const threadOf = (args: unknown, request: ToolCallRequestLike): Json => {
    if (scope !== undefined) return resolveScope('langchain', scope, [args, request], 'return a thread or run id from "scope".');
    const threadId = idOf(request.runtime?.configurable?.thread_id);
    if (threadId === undefined) {
      throw new TypeError(
        `${WHERE}: the agent ran without a thread id (configurable.thread_id is ${describe(request.runtime?.configurable?.thread_id)}). ` +
          'Invoke it with { configurable: { thread_id } } (and a checkpointer), or pass idempotentToolsMiddleware({ scope }).',
      );
    }
    return threadId;
  };

  type Guard = (args: unknown, invocation: Invocation) => Promise<unknown>;
  const guards = new Map<string, Guard>();
  const guardFor = (toolName: string): Guard => {
    let guard = guards.get(toolName);
    if (guard !== undefined) return guard;
    const entry = perTool[toolName];
    const { guard: _, ...own } = entry === false || entry === undefined ? {} : entry;
    guard = wrapToolCall<unknown, [Invocation], Promise<unknown>>(
      {
        name: 'langchain',
        generator: 'return-value',
        carriesToolName: true,
        revive,
        toStorable,
        identify: (args, [{ request, signal }]) => {
          const toolCallId = idOf(request.toolCall.id);
          if (toolCallId === undefined) {
            throw new TypeError(`${WHERE}: the tool call has no id (request.toolCall.id is ${describe(request.toolCall.id)}); the model's tool calls need ids to be keyed.`);
          }
          const configurable = request.runtime?.configurable;
          const thread = threadOf(args, request);
          const ns = typeof configurable?.checkpoint_ns === 'string' ? stripTaskIds(configurable.checkpoint_ns) : '';
          const message = aiMessageIdOf({ state: request.state }, toolCallId) ?? null;
          return {
            framework: 'langchain',
            toolCallId,
            toolName,
            signal,
            scope: { thread, checkpoint_ns: ns, message },
            conversation: { thread, checkpoint_ns: ns },
            approvalScope: thread,
            turn: message,
            ...(message === null && isNumberedCallId(toolCallId) ? { turnUnknown: unknownMessage(WHERE, toolCallId) } : {}),
          };
        },
        approvals: {
          // humanInTheLoopMiddleware's decisions, from the checkpoints of the branch that runs.
          reported: (_args, [{ request }], site) => hitlDecisions(request.runtime?.configurable as Record<string, unknown> | undefined, site.turn ?? null),
          refused: (refusal, _args, [{ request }], site) => refusalToolMessage(refusal, { id: site.toolCallId, name: request.toolCall.name }),
        },
      },
      // What runs is the rest of the chain for this call (the tool, or the inner handler).
      (_args: unknown, invocation: Invocation) => invocation.run(),
      { ...defaults, ...own, name: toolName } as ToolHelperOptions<unknown, Promise<unknown>> & Record<string, unknown>,
    );
    guards.set(toolName, guard);
    return guard;
  };
  // Options are checked now, not at a tool's first call (where a mistake would reach the
  // model as a tool error): the named tools' guards, else a guard no tool uses (tool names
  // have no spaces) for the shared options.
  for (const name of Object.keys(perTool)) if (!skipped.has(name)) guardFor(name);
  if (Object.keys(perTool).length === 0 && Object.keys(defaults).length > 0) guardFor('idempotentToolsMiddleware options');

  /** A copy of `tool` whose `invoke` runs inside the guard: every attempt of any inner middleware goes through it. */
  const guardedTool = (tool: NonNullable<ToolCallRequestLike['tool']>, request: ToolCallRequestLike, guard: Guard) => {
    const copy = Object.create(tool) as typeof tool;
    copy.invoke = async (input: unknown, config?: unknown) => {
      const call = isToolCall(input) ? { ...request.toolCall, id: input.id ?? request.toolCall.id, args: input.args } : { ...request.toolCall, args: input };
      try {
        const result = await guard(call.args, {
          request: { ...request, toolCall: call },
          run: () => tool.invoke(input, config),
          signal: (config as { signal?: unknown } | undefined)?.signal ?? request.runtime?.signal,
        });
        return forThisCall(result, call.id);
      } catch (err) {
        stampNotRetryable(err);
        throw err;
      }
    };
    return copy;
  };

  const wrapToolCallHook = async (request: ToolCallRequestLike, handler: Handler): Promise<unknown> => {
    const toolName = request.toolCall.name;
    try {
      if (skipped.has(toolName)) return await handler(request);
      const guard = guardFor(toolName);
      if (request.tool !== undefined && typeof request.tool.invoke === 'function') {
        return await handler({ ...request, tool: guardedTool(request.tool, request, guard) });
      }
      // A tool registered dynamically (no request.tool): guard the rest of the chain.
      try {
        const result = await guard(request.toolCall.args, { request, run: () => handler(request), signal: request.runtime?.signal });
        return forThisCall(result, request.toolCall.id);
      } catch (err) {
        stampNotRetryable(err);
        throw err;
      }
    } catch (err) {
      if (toolErrors === 'throw' || passesThrough(err, request)) throw err;
      return errorToolMessage(err, request);
    }
  };

  /**
   * Before a model call: the rejections humanInTheLoopMiddleware made on the turn before
   * it. A rejected call never reaches the tools, so no guard sees it; recorded here, the
   * rejection stays final when the turn is replayed or resubmitted with an approval.
   * Reads the checkpoints only when the last AI message has calls answered with an error.
   */
  const wrapModelCallHook = async (request: ToolCallRequestLike & Record<string, unknown>, handler: Handler): Promise<unknown> => {
    const messageId = rejectedCallsMessage(request.state?.messages);
    if (messageId !== undefined) {
      const configurable = request.runtime?.configurable as Record<string, unknown> | undefined;
      const rejections = (await hitlDecisions(configurable, messageId)).filter((d) => d.decision === 'reject' && !skipped.has(d.toolName));
      for (const r of rejections) {
        const entry = perTool[r.toolName];
        const own = { ...defaults, ...(entry === false || entry === undefined ? {} : entry) };
        let thread: Json;
        try {
          thread = threadOf(r.args, { toolCall: { id: r.toolCallId, name: r.toolName, args: r.args }, state: request.state, runtime: request.runtime });
        } catch {
          continue; // no thread: its tool calls say so (the rejected one never runs anyway)
        }
        const onEvent = own.onEvent as ((e: IdempotencyEvent) => void) | undefined;
        await recordReported((own.store as Store | undefined) ?? defaultStore(), thread, [r], {
          source: 'langchain',
          ttlMs: own.ttlMs,
          meta: (toolCallId) => ({ framework: 'langchain', toolCallId, scope: scopeLabel(thread) }),
          emit: (toolCallId, event) =>
            publish(onEvent, { ...event, durationMs: 0, framework: 'langchain', toolCallId, scope: { thread, checkpoint_ns: '', message: messageId } } as IdempotencyEvent),
        });
      }
    }
    return handler(request);
  };

  const config = { name: 'idempotentToolsMiddleware', wrapToolCall: wrapToolCallHook, wrapModelCall: wrapModelCallHook };
  try {
    const { createMiddleware } = require('langchain') as { createMiddleware?: (c: typeof config) => IdempotentToolsMiddleware };
    if (typeof createMiddleware === 'function') return createMiddleware(config);
  } catch {
    // langchain not installed: the same shape by hand (createAgent checks this brand)
  }
  return { [Symbol.for('AgentMiddleware')]: true, ...config } as IdempotentToolsMiddleware;
}
