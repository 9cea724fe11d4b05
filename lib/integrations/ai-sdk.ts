/**
 * `idempotent-tools/ai-sdk`: idempotent `execute` functions for Vercel AI SDK tools
 * (`ai` 5 and 6: `execute(input, { toolCallId, messages, abortSignal, experimental_context })`).
 * Imports nothing from `ai`: it only reads the options object.
 *
 * The AI SDK has no conversation id, and tool call ids are only unique within one
 * conversation, so a `scope` is required: your chat id, from a closure or from
 * `experimental_context`.
 *
 * ```ts
 * import { tool } from 'ai';
 * import { idempotentTool } from 'idempotent-tools/ai-sdk';
 *
 * const sendPayment = tool({
 *   inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
 *   needsApproval: true,
 *   execute: idempotentTool(async function sendPayment({ orderId, cents }) { ... }, {
 *     scope: (input, { experimental_context }) => (experimental_context as { chatId: string }).chatId,
 *   }),
 * });
 * ```
 */

import { type Scope, type ToolHelperOptions, describe, idOf, resolveScope, wrapToolCall } from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome } from './shared.js';

/** The parts of the AI SDK's `ToolExecutionOptions` this helper reads. */
export interface AiSdkToolOptionsLike {
  toolCallId?: string;
  experimental_context?: unknown;
}

export interface AiSdkToolOptions<I, R> extends ToolHelperOptions<I, R> {
  /**
   * Required: the conversation (chat, session, run) the tool call belongs to. A JSON value
   * (when you build the tools per request), or a function of `(input, options)`, e.g.
   * `(input, o) => o.experimental_context.chatId`.
   */
  scope: Scope<[I, AiSdkToolOptionsLike]>;
}

const HINT =
  'pass { scope: chatId } when you build the tools for a request, or { scope: (input, options) => options.experimental_context.chatId }.';

/**
 * Wraps an AI SDK `execute(input, options)`: the key comes from the scope, `options.toolCallId`
 * and the input; the options object (messages, abort signal) is passed through but never
 * serialized into the key. A missing scope is a TypeError at wrap time (or at call time
 * when the scope function returns nothing); a call without a `toolCallId` (called by hand,
 * outside `generateText`/`streamText`) is a TypeError.
 */
export function idempotentTool<I, R>(
  fn: (input: I, options: AiSdkToolOptionsLike) => R,
  options: AiSdkToolOptions<I, R>,
): (input: I, options: AiSdkToolOptionsLike) => Promise<Awaited<R>> {
  const { scope, ...rest } = options ?? ({} as Partial<AiSdkToolOptions<I, R>>);
  if (scope === undefined || scope === null || scope === '') {
    throw new TypeError(
      `idempotent-tools/ai-sdk: idempotentTool() needs a "scope" option (it is ${describe(scope)}). ` +
        `The AI SDK has no conversation id and tool call ids repeat across conversations; ${HINT}`,
    );
  }
  return wrapToolCall<I, [AiSdkToolOptionsLike], R>('ai-sdk', fn, rest, (input, [execOptions]) => {
    const toolCallId = idOf(execOptions?.toolCallId);
    if (toolCallId === undefined) {
      throw new TypeError(
        `idempotent-tools/ai-sdk: the tool was called without a toolCallId (its second argument is ${execOptions === null || typeof execOptions !== 'object' ? describe(execOptions) : 'an object without toolCallId'}). ` +
          'Let generateText/streamText call it, or pass { toolCallId } yourself when you call execute directly.',
      );
    }
    return { framework: 'ai-sdk', toolCallId, scope: resolveScope('ai-sdk', scope, [input, execOptions], HINT) };
  }) as (input: I, options: AiSdkToolOptionsLike) => Promise<Awaited<R>>;
}
