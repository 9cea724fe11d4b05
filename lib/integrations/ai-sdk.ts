/**
 * `idempotent-tools/ai-sdk`: idempotent `execute` functions for Vercel AI SDK tools
 * (`ai` 5 and 6: `execute(input, { toolCallId, messages, abortSignal, experimental_context })`;
 * `ai` 7: `execute(input, { toolCallId, messages, abortSignal, context })`, the tool's own
 * context from `toolsContext`). Imports nothing from `ai`: it only reads the options object.
 *
 * A whole tool set at once (also the tools of an MCP client, `await mcp.tools()`):
 *
 * ```ts
 * const tools = idempotentTools({ sendPayment, searchDocs }, {
 *   scope: (input, { context }) => context.chatId,   // ai 7 (toolsContext); ai 6: experimental_context
 *   readOnly: ['searchDocs'],
 * });
 * ```
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

import type { ReportedDecision } from './approval-guard.js';
import { type Scope, type ToolHelperOptions, type ToolSetChoices, copyTool, describe, idOf, resolveScope, toolSetOptions, wrapToolCall } from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome, ToolReconcileRequest, ToolReconcileAnswer } from './shared.js';

/** The parts of the AI SDK's `ToolExecutionOptions` this helper reads. */
export interface AiSdkToolOptionsLike {
  toolCallId?: string;
  /** `ai` 5 and 6: the context given to generateText/streamText. */
  experimental_context?: unknown;
  /** `ai` 7: this tool's context, from generateText's `toolsContext[toolName]` (validated by its `contextSchema`). */
  context?: unknown;
  messages?: unknown[];
  abortSignal?: unknown;
}

/**
 * The turn of a tool call: the position of the assistant message that made it (the number
 * of messages before it). While the call executes in the step that produced it, `messages`
 * ends just before that assistant message; when it runs later (an approved call, a
 * resubmitted history) the message is in `messages`, with no result for the call after it.
 * Either way the number is the same for a retry or a resubmission of the same history, and
 * differs for a later turn whose tool call got the same id (providers that restart ids at
 * `call_0` every turn): an earlier call with that id already has its result in `messages`.
 */
export function turnOf(messages: unknown, toolCallId: string): number | null {
  if (!Array.isArray(messages)) return null;
  const hasPart = (m: { content?: unknown }, type: string) =>
    Array.isArray(m.content) && m.content.some((p: { type?: unknown; toolCallId?: unknown } | null) => p !== null && typeof p === 'object' && p.type === type && p.toolCallId === toolCallId);
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown } | null;
    if (m === null || typeof m !== 'object') continue;
    if (m.role === 'tool' && hasPart(m, 'tool-result')) break; // an earlier call with this id, finished
    if (m.role === 'assistant' && hasPart(m, 'tool-call')) return i;
  }
  return messages.length;
}

type Part = { type?: unknown; toolCallId?: unknown; toolName?: unknown; input?: unknown; approvalId?: unknown; approved?: unknown; reason?: unknown } | null;

/** The assistant message that made the call (as `turnOf` finds it), or -1. */
function callMessageIndex(messages: unknown, toolCallId: string): number {
  const turn = turnOf(messages, toolCallId);
  if (turn === null || !Array.isArray(messages) || turn >= messages.length) return -1;
  return turn;
}

function partsOf(message: unknown): Part[] {
  const content = (message as { content?: unknown } | null)?.content;
  return Array.isArray(content) ? (content as Part[]).filter((p) => p !== null && typeof p === 'object') : [];
}

/**
 * The approvals of the call's turn, as the AI SDK reports them in `messages`: each
 * `tool-approval-request` of the assistant message that made the call, answered by a
 * `tool-approval-response` in a tool message after it (approved or denied, with its reason).
 * The approval id is the turn: it is unique to one request, so an approval never covers a
 * later turn's call that reuses the id. Siblings' answers come too, so a denial is recorded
 * when an approved call of the same answer runs (the AI SDK never runs a denied one).
 */
export function approvalsOf(messages: unknown, toolCallId: string): { turn: string | null; toolName?: string; decisions: ReportedDecision[] } {
  const at = callMessageIndex(messages, toolCallId);
  if (at === -1) return { turn: null, decisions: [] };
  const list = messages as unknown[];
  const parts = partsOf(list[at]);
  const calls = new Map(parts.filter((p) => p!.type === 'tool-call' && typeof p!.toolCallId === 'string').map((p) => [p!.toolCallId as string, p!]));
  const requests = new Map(parts.filter((p) => p!.type === 'tool-approval-request' && typeof p!.approvalId === 'string').map((p) => [p!.approvalId as string, p!.toolCallId]));
  const own = calls.get(toolCallId);
  let turn: string | null = null;
  for (const [approvalId, callId] of requests) if (callId === toolCallId) turn = approvalId;
  const decisions: ReportedDecision[] = [];
  for (const m of list.slice(at + 1)) {
    if ((m as { role?: unknown } | null)?.role !== 'tool') continue;
    for (const p of partsOf(m)) {
      if (p!.type !== 'tool-approval-response' || typeof p!.approvalId !== 'string' || typeof p!.approved !== 'boolean') continue;
      const call = calls.get(requests.get(p!.approvalId) as string);
      if (call === undefined || typeof call.toolName !== 'string') continue;
      decisions.push({
        toolCallId: call.toolCallId as string,
        toolName: call.toolName,
        args: call.input,
        decision: p!.approved ? 'approve' : 'reject',
        turn: p!.approvalId,
        reason: typeof p!.reason === 'string' ? p!.reason : undefined,
      });
    }
  }
  return { turn, toolName: typeof own?.toolName === 'string' ? own.toolName : undefined, decisions };
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
  'pass { scope: chatId } when you build the tools for a request, or { scope: (input, options) => options.context.chatId } ' +
  '(ai 7, with toolsContext: { toolName: { chatId } }; ai 5 and 6: options.experimental_context.chatId).';

/**
 * Wraps an AI SDK `execute(input, options)`: the key comes from the scope, the turn (see
 * `turnOf`), `options.toolCallId` and the input; the options object (messages, abort
 * signal) is passed through but never serialized into the key. A missing scope is a
 * TypeError at wrap time (or at call time when the scope function returns nothing, also
 * a process warning); a call without a `toolCallId` (called by hand, outside
 * `generateText`/`streamText`) is a TypeError. An async generator `execute` (preliminary
 * results) runs inside its record and its last value is the result.
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
  return wrapToolCall<I, [AiSdkToolOptionsLike], R>(
    {
      name: 'ai-sdk',
      generator: 'last-yield',
      carriesToolName: false,
      identify: (input, [execOptions]) => {
        const toolCallId = idOf(execOptions?.toolCallId);
        if (toolCallId === undefined) {
          throw new TypeError(
            `idempotent-tools/ai-sdk: the tool was called without a toolCallId (its second argument is ${execOptions === null || typeof execOptions !== 'object' ? describe(execOptions) : 'an object without toolCallId'}). ` +
              'Let generateText/streamText call it, or pass { toolCallId } yourself when you call execute directly.',
          );
        }
        const chat = resolveScope('ai-sdk', scope, [input, execOptions], HINT);
        const approval = approvalsOf(execOptions.messages, toolCallId);
        return {
          framework: 'ai-sdk',
          toolCallId,
          toolName: approval.toolName,
          signal: execOptions.abortSignal,
          scope: { chat, turn: turnOf(execOptions.messages, toolCallId) },
          conversation: { chat },
          approvalScope: chat,
          turn: approval.turn,
        };
      },
      approvals: {
        reported: (_input, [execOptions], site) => approvalsOf(execOptions.messages, site.toolCallId).decisions,
      },
    },
    fn,
    rest as AiSdkToolOptions<I, R> & Record<string, unknown>,
  ) as (input: I, options: AiSdkToolOptionsLike) => Promise<Awaited<R>>;
}

/** The options of `idempotentTools`: every tool's options (scope required), and per-tool choices. */
export type AiSdkToolSetOptions = Omit<AiSdkToolOptions<any, unknown>, 'name'> & ToolSetChoices<Partial<AiSdkToolOptions<any, unknown>>>;

/**
 * Wraps every tool of an AI SDK tool set (a `ToolSet` record, also the tools of an MCP client
 * from `@ai-sdk/mcp`): each tool with an `execute` gets an idempotent one (as `idempotentTool`
 * makes it, named after its key in the set); tools without `execute` (client-side tools,
 * provider-executed tools) are left as they are, as are the tools in `readOnly` or
 * `tools: { name: false }`. Returns a new set; the tools passed in are not changed.
 */
export function idempotentTools<T extends Record<string, unknown>>(tools: T, options: AiSdkToolSetOptions): T {
  const where = 'idempotent-tools/ai-sdk';
  if (tools === null || typeof tools !== 'object' || Array.isArray(tools)) {
    throw new TypeError(`${where}: idempotentTools(tools, options) takes a tool set (an object of tools by name), not ${Array.isArray(tools) ? 'an array' : describe(tools)}`);
  }
  const optionsOf = toolSetOptions<AiSdkToolOptions<any, unknown>>(where, Object.keys(tools), options);
  const out: Record<string, unknown> = {};
  for (const [name, tool] of Object.entries(tools)) {
    const execute = (tool as { execute?: unknown } | null)?.execute;
    const own = optionsOf(name);
    if (typeof execute !== 'function' || own === undefined) {
      out[name] = tool;
      continue;
    }
    if (own.scope === undefined || own.scope === null || own.scope === '') {
      throw new TypeError(`${where}: tool "${name}": idempotentTools() needs a "scope" option (it is ${describe(own.scope)}). The AI SDK has no conversation id and tool call ids repeat across conversations; ${HINT}`);
    }
    out[name] = copyTool(tool as object, { execute: idempotentTool(execute as (input: unknown, o: AiSdkToolOptionsLike) => unknown, own) });
  }
  return out as T;
}
