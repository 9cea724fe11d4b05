/**
 * `idempotent-tools/openai-agents`: idempotent `execute` functions for OpenAI Agents JS
 * tools (`execute(input, runContext, details)`, the call id at `details.toolCall.callId`).
 * Imports nothing from `@openai/agents`: it only reads the objects it is given.
 *
 * Call ids are only unique within one conversation, so a `scope` is required: a
 * conversation or run id, typically from your run context (`runContext.context`), which is
 * serialized with the `RunState` and so is the same when a run is resumed.
 *
 * ```ts
 * import { tool } from '@openai/agents';
 * import { idempotentTool } from 'idempotent-tools/openai-agents';
 *
 * const sendPayment = tool({
 *   name: 'send_payment',
 *   parameters: z.object({ orderId: z.string(), cents: z.number() }),
 *   needsApproval: true,
 *   execute: idempotentTool(async function sendPayment({ orderId, cents }) { ... }, {
 *     scope: (input, runContext) => runContext.context.conversationId,
 *   }),
 * });
 * ```
 */

import { type Framework, type Scope, type ToolHelperOptions, type ToolSetChoices, copyTool, describe, idOf, resolveScope, toolSetOptions, wrapToolCall } from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome, ToolReconcileRequest, ToolReconcileAnswer } from './shared.js';

/** The parts of an Agents SDK `RunContext` this helper reads: the context for `scope`, and the approvals. */
export interface RunContextLike<C = any> {
  context: C;
  isToolApproved?(approval: { toolName: string; callId: string }): boolean | undefined;
  getRejectionMessage?(toolName: string, callId: string): string | undefined;
}

/** The parts of the Agents SDK's `ToolCallDetails` this helper reads. */
export interface ToolCallDetailsLike {
  toolCall?: { callId?: string; id?: string; name?: string; arguments?: string };
  signal?: unknown;
}

/** What the Agents SDK tells the model for a rejected call (its TOOL_APPROVAL_REJECTION_MESSAGE). */
const REJECTION_MESSAGE = 'Tool execution was not approved.';

/** The model's arguments of the call (its JSON text, parsed), for approvals; undefined when absent or not JSON. */
function modelArguments(details: ToolCallDetailsLike | undefined): unknown {
  const text = details?.toolCall?.arguments;
  if (typeof text !== 'string') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The id the Agents SDK gives items whose provider sent none (Chat Completions): no help in telling turns apart. */
const FAKE_ID = '__fake_id__';

export interface OpenAiAgentsToolOptions<I, R, C = any> extends ToolHelperOptions<I, R> {
  /**
   * Required: the conversation or run the call belongs to. A JSON value, or a function of
   * `(input, runContext, details)`, e.g. `(input, rc) => rc.context.conversationId`.
   */
  scope: Scope<[I, RunContextLike<C>, ToolCallDetailsLike | undefined]>;
}

const HINT =
  'pass { scope: (input, runContext) => runContext.context.conversationId } (put the id in the context you give run()), or a fixed id when you build the tools per conversation.';

/**
 * Wraps an Agents SDK tool `execute(input, runContext, details)`: the key comes from the
 * scope, `details.toolCall.callId` and the input; the run context and details are passed
 * through but never serialized into the key. A missing scope, or a call without
 * `details.toolCall.callId` (the tool called by hand, outside a run), is a TypeError.
 */
export function idempotentTool<I, R, C = any>(
  fn: (input: I, runContext: RunContextLike<C>, details?: ToolCallDetailsLike) => R,
  options: OpenAiAgentsToolOptions<I, R, C>,
): (input: I, runContext?: RunContextLike<C>, details?: ToolCallDetailsLike) => Promise<Awaited<R>> {
  const { scope, ...rest } = options ?? ({} as Partial<OpenAiAgentsToolOptions<I, R, C>>);
  if (scope === undefined || scope === null || scope === '') {
    throw new TypeError(
      `idempotent-tools/openai-agents: idempotentTool() needs a "scope" option (it is ${describe(scope)}). ` +
        `Call ids repeat across conversations; ${HINT}`,
    );
  }
  type Rest = [RunContextLike<C>, ToolCallDetailsLike | undefined];
  return wrapToolCall<I, Rest, R>(
    agentsFramework<I, Rest>(scope as Scope<[I, RunContextLike<C>, ToolCallDetailsLike | undefined]>),
    fn as (input: I, ...rest: Rest) => R,
    rest as OpenAiAgentsToolOptions<I, R, C> & Record<string, unknown>,
  ) as (input: I, runContext?: RunContextLike<C>, details?: ToolCallDetailsLike) => Promise<Awaited<R>>;
}

/** How this helper reads a call: the call id and item id from `details`, the scope from the option. */
function agentsFramework<I, Rest extends [RunContextLike, ToolCallDetailsLike | undefined, ...unknown[]]>(
  scope: Scope<[I, RunContextLike, ToolCallDetailsLike | undefined]>,
  failedOutput?: (result: unknown) => string | undefined,
): Framework<I, Rest> {
  return {
      name: 'openai-agents',
      generator: 'last-yield',
      carriesToolName: true,
      failedOutput,
      identify: (input, [runContext, details]) => {
        const toolCallId = idOf(details?.toolCall?.callId);
        if (toolCallId === undefined) {
          throw new TypeError(
            'idempotent-tools/openai-agents: the tool was called without details.toolCall.callId (its third argument is ' +
              `${details === null || typeof details !== 'object' ? describe(details) : 'an object without toolCall.callId'}). ` +
              'Let the Runner call it, or pass (input, runContext, { toolCall: { callId } }) when you call it directly.',
          );
        }
        // The model's output item id (Responses API) is unique per turn even when a provider
        // reuses call ids; the Chat Completions path has none (a fixed placeholder).
        const itemId = idOf(details?.toolCall?.id);
        const item = itemId === undefined || itemId === FAKE_ID ? null : itemId;
        const conversation = resolveScope('openai-agents', scope, [input, runContext, details], HINT);
        return {
          framework: 'openai-agents',
          toolCallId,
          toolName: typeof details?.toolCall?.name === 'string' ? details.toolCall.name : undefined,
          signal: details?.signal,
          scope: { conversation, item },
          conversation: { conversation },
          approvalScope: conversation,
          turn: item,
        };
      },
      approvals: {
        // The run's own decision (RunState approve/reject, kept in its RunContext): approved
        // calls run; a rejected one is never run by the Runner, but is refused here too.
        reported: (input, [runContext, details], site) => {
          const toolName = site.toolName;
          if (toolName === undefined || typeof runContext?.isToolApproved !== 'function') return [];
          const approved = runContext.isToolApproved({ toolName, callId: site.toolCallId });
          if (approved === undefined) return [];
          const args = modelArguments(details) ?? input;
          if (approved) return [{ toolCallId: site.toolCallId, toolName, args, decision: 'approve', turn: site.turn ?? null }];
          const reason = typeof runContext.getRejectionMessage === 'function' ? runContext.getRejectionMessage(toolName, site.toolCallId) : undefined;
          return [{ toolCallId: site.toolCallId, toolName, args, decision: 'reject', turn: site.turn ?? null, reason }];
        },
        args: (input, [, details]) => modelArguments(details) ?? input,
        // The SDK's own answers: its rejection text (or the reason given), or what happened.
        refused: (refusal) => (refusal.kind === 'rejected' ? (refusal.reason ?? REJECTION_MESSAGE) : refusal.error.message),
      },
  };
}

/** What `tool()` from `@openai/agents` makes: the parts this helper reads and replaces. */
export interface FunctionToolLike {
  type: string;
  name: string;
  invoke: (runContext: any, input: string, details?: any) => Promise<unknown>;
}

/** The options of `idempotentTools`: every tool's options (scope required), and per-tool choices. */
export type OpenAiAgentsToolSetOptions<C = any> = Omit<OpenAiAgentsToolOptions<any, unknown, C>, 'name'> &
  ToolSetChoices<Partial<OpenAiAgentsToolOptions<any, unknown, C>>>;

/**
 * What the Agents SDK's default `errorFunction` makes of a throw: "An error occurred while
 * running the tool. Please try again." (0.20: without the error; earlier versions add
 * " Error: <error>"). The model gets it, and the call is recorded as failed (so the next
 * call runs again), not as a result to replay.
 */
const DEFAULT_ERROR = 'An error occurred while running the tool. Please try again.';
const DEFAULT_ERROR_PREFIX = `${DEFAULT_ERROR} Error: `;
function defaultErrorOutput(result: unknown): string | undefined {
  if (typeof result !== 'string') return undefined;
  if (result === DEFAULT_ERROR) return 'the tool threw (the SDK\'s default errorFunction does not say what)';
  return result.startsWith(DEFAULT_ERROR_PREFIX) ? result.slice(DEFAULT_ERROR_PREFIX.length) : undefined;
}

/**
 * Wraps every function tool of an agent's `tools` array (what `tool()` returns): each one's
 * `invoke` runs inside its record, keyed by the scope, the call id and the parsed input;
 * other tools (hosted tools, computer, shell), the tools in `readOnly` and those with
 * `tools: { name: false }` are left as they are. The per-tool `timeoutMs` stays outside the
 * guard: a call that timed out keeps running, and the model's next call under the same
 * business key (`key`) waits for it and gets its result. Returns a new array.
 */
export function idempotentTools<T extends readonly unknown[], C = any>(tools: T, options: OpenAiAgentsToolSetOptions<C>): T {
  const where = 'idempotent-tools/openai-agents';
  if (!Array.isArray(tools)) throw new TypeError(`${where}: idempotentTools(tools, options) takes an agent's tools array, not ${describe(tools)}`);
  const isFunctionTool = (t: unknown): t is FunctionToolLike =>
    t !== null && typeof t === 'object' && (t as FunctionToolLike).type === 'function' && typeof (t as FunctionToolLike).invoke === 'function' && typeof (t as FunctionToolLike).name === 'string';
  const names = tools.filter(isFunctionTool).map((t) => t.name);
  const optionsOf = toolSetOptions<OpenAiAgentsToolOptions<any, unknown, C>>(where, names, options);
  return tools.map((t) => {
    if (!isFunctionTool(t)) return t;
    const own = optionsOf(t.name);
    if (own === undefined) return t;
    const { scope, ...rest } = own;
    if (scope === undefined || scope === null || scope === '') {
      throw new TypeError(`${where}: tool "${t.name}": idempotentTools() needs a "scope" option (it is ${describe(scope)}). Call ids repeat across conversations; ${HINT}`);
    }
    const invoke = t.invoke;
    type Rest = [RunContextLike<C>, ToolCallDetailsLike | undefined, string];
    // The key is made from the parsed input (so {"a":1,"b":2} and {"b":2,"a":1} are one call);
    // the tool gets the JSON text the model sent, as before.
    // What the tool's own invoke threw (an abort, a raise_exception timeout) goes on as it was.
    const thrownByTool = new WeakSet<object>();
    const guarded = wrapToolCall<unknown, Rest, Promise<unknown>>(
      agentsFramework<unknown, Rest>(scope as Scope<[unknown, RunContextLike, ToolCallDetailsLike | undefined]>, defaultErrorOutput),
      async function (this: unknown, _parsed: unknown, runContext: RunContextLike<C>, details: ToolCallDetailsLike | undefined, text: string) {
        try {
          return await invoke.call(t, runContext, text, details);
        } catch (err) {
          if (err !== null && typeof err === 'object') thrownByTool.add(err);
          throw err;
        }
      },
      rest as ToolHelperOptions<unknown, Promise<unknown>> & Record<string, unknown>,
    );
    return copyTool(t, {
      invoke: async (runContext: RunContextLike<C>, input: string, details?: ToolCallDetailsLike) => {
        try {
          return await guarded(parsedInput(input), runContext, details, input);
        } catch (err) {
          // Our own errors (a key mismatch, a configuration error, the store) reach the model
          // as the SDK renders a tool's error, not as a failed run.
          if (err !== null && typeof err === 'object' && thrownByTool.has(err)) throw err;
          return `${DEFAULT_ERROR_PREFIX}${err instanceof Error ? err.toString() : String(err)}`;
        }
      },
    });
  }) as unknown as T;
}

/** The model's JSON arguments as data for the key; text that is not JSON is keyed as the text. */
function parsedInput(input: unknown): unknown {
  if (typeof input !== 'string') return input;
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}
