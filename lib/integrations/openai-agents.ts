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

import { type Scope, type ToolHelperOptions, describe, idOf, resolveScope, wrapToolCall } from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome, ToolReconcileRequest, ToolReconcileAnswer } from './shared.js';

/** The parts of an Agents SDK `RunContext` this helper passes to `scope`. */
export interface RunContextLike<C = any> {
  context: C;
}

/** The parts of the Agents SDK's `ToolCallDetails` this helper reads. */
export interface ToolCallDetailsLike {
  toolCall?: { callId?: string; id?: string; name?: string };
  signal?: unknown;
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
    {
      name: 'openai-agents',
      generator: 'last-yield',
      carriesToolName: true,
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
        const conversation = resolveScope('openai-agents', scope, [input, runContext, details], HINT);
        return {
          framework: 'openai-agents',
          toolCallId,
          toolName: typeof details?.toolCall?.name === 'string' ? details.toolCall.name : undefined,
          signal: details?.signal,
          scope: { conversation, item: itemId === undefined || itemId === FAKE_ID ? null : itemId },
          conversation: { conversation },
        };
      },
    },
    fn as (input: I, ...rest: Rest) => R,
    rest as OpenAiAgentsToolOptions<I, R, C> & Record<string, unknown>,
  ) as (input: I, runContext?: RunContextLike<C>, details?: ToolCallDetailsLike) => Promise<Awaited<R>>;
}
