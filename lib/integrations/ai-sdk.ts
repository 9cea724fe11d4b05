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

import { defaultStore } from '../core/default-store.js';
import type { Store } from '../core/store.js';
import { type ReportedDecision, recordReported } from './approval-guard.js';
import { CannotTellError, ambiguousReplayOf, callMessageIndex, openingWithNumberedId, turnOfAiSdkCall } from './identity.js';
import {
  type Json,
  type Scope,
  type ToolHelperOptions,
  type ToolSetChoices,
  copyTool,
  describe,
  idOf,
  resolveScope,
  scopeLabel,
  toolSetOptions,
  wrapToolCall,
} from './shared.js';

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

function partsOf(message: unknown): Part[] {
  const content = (message as { content?: unknown } | null)?.content;
  return Array.isArray(content) ? (content as Part[]).filter((p) => p !== null && typeof p === 'object') : [];
}

type Part = { type?: unknown; toolCallId?: unknown; toolName?: unknown; input?: unknown; approvalId?: unknown; approved?: unknown; reason?: unknown } | null;

/**
 * Every answer to an approval request in `messages`: each `tool-approval-response` (in a
 * tool message), with the `tool-approval-request` it answers and the tool call that
 * request is about (in an assistant message before it). The approval id is the turn: it is
 * unique to one request, so a decision never covers a later turn's call that reuses the id.
 */
export function approvalResponsesIn(messages: unknown): Array<ReportedDecision & { message: number }> {
  if (!Array.isArray(messages)) return [];
  const calls = new Map<string, { part: NonNullable<Part>; message: number }>();
  const requests = new Map<string, string>();
  const out: Array<ReportedDecision & { message: number }> = [];
  const seen = new Set<string>();
  messages.forEach((m, i) => {
    const role = (m as { role?: unknown } | null)?.role;
    for (const p of partsOf(m)) {
      if (role === 'assistant' && p!.type === 'tool-call' && typeof p!.toolCallId === 'string') calls.set(p!.toolCallId, { part: p!, message: i });
      if (role === 'assistant' && p!.type === 'tool-approval-request' && typeof p!.approvalId === 'string' && typeof p!.toolCallId === 'string') {
        requests.set(p!.approvalId, p!.toolCallId);
      }
      if (role !== 'tool' || p!.type !== 'tool-approval-response' || typeof p!.approvalId !== 'string' || typeof p!.approved !== 'boolean') continue;
      if (seen.has(p!.approvalId)) continue; // the first answer to a request is the one the SDK reads
      const call = calls.get(requests.get(p!.approvalId) ?? '');
      if (call === undefined || typeof call.part.toolName !== 'string') continue;
      seen.add(p!.approvalId);
      out.push({
        toolCallId: call.part.toolCallId as string,
        toolName: call.part.toolName,
        args: call.part.input,
        decision: p!.approved ? 'approve' : 'reject',
        turn: p!.approvalId,
        reason: typeof p!.reason === 'string' ? p!.reason : undefined,
        message: call.message,
      });
    }
  });
  return out;
}

/**
 * The approvals a guarded call reports, as the AI SDK shows them in `messages`: the turn
 * of the call (its approval id), and the decisions to record: the answers to the requests
 * of the assistant message that made the call (its own and its siblings', so a denial is
 * recorded when an approved call of the same answer runs), and every denial anywhere in
 * the history (a lone denial, which nothing of its own request ran, arrives again in every
 * later request's messages: the first guarded call that runs records it).
 */
export function approvalsOf(messages: unknown, toolCallId: string): { turn: string | null; toolName?: string; decisions: ReportedDecision[] } {
  const at = callMessageIndex(messages, toolCallId);
  const own = at === -1 ? [] : partsOf((messages as unknown[])[at]);
  const call = own.find((p) => p!.type === 'tool-call' && p!.toolCallId === toolCallId);
  const request = own.find((p) => p!.type === 'tool-approval-request' && p!.toolCallId === toolCallId && typeof p!.approvalId === 'string');
  const decisions: ReportedDecision[] = [];
  for (const { message, ...d } of approvalResponsesIn(messages)) {
    if ((at !== -1 && message === at) || d.decision === 'reject') decisions.push(d);
  }
  return {
    turn: request == null ? null : (request.approvalId as string),
    toolName: typeof call?.toolName === 'string' ? call.toolName : undefined,
    decisions,
  };
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
 * `callTurn`), `options.toolCallId` and the input; the options object (messages, abort
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
        const turn = turnOfAiSdkCall(execOptions.messages, toolCallId);
        return {
          framework: 'ai-sdk',
          toolCallId,
          toolName: approval.toolName,
          signal: execOptions.abortSignal,
          scope: { chat, turn: turn?.turn ?? 'none' },
          conversation: { chat },
          approvalScope: chat,
          turn: approval.turn,
          ...(turn === undefined
            ? { turnUnknown: new CannotTellError('key', `idempotent-tools/ai-sdk: tool call ${toolCallId} came without options.messages, so nothing tells its turn (providers that restart ids at call_0 reuse the id every turn). Let generateText/streamText call it, pass the messages, or give the tool a business key: { key: (input) => \`order-\${input.orderId}\` }.`) }
            : { turnUnknown: openingWithNumberedId('idempotent-tools/ai-sdk', turn, toolCallId), ambiguousReplay: ambiguousReplayOf(turn, approval.toolName) }),
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

/** What `recordApprovalResponses` takes besides the messages. */
export interface RecordApprovalResponsesOptions {
  /** The chat, as the tools' `scope` option gives it (the same value). */
  scope: Json;
  /** The tools' store. Default: `defaultStore()`. */
  store?: Store;
  /** Forget the decisions this long after they were recorded, as the calls' records are forgotten. */
  ttlMs?: number;
}

/**
 * `await recordApprovalResponses(messages, { scope: chatId })`: records every answer to a
 * tool approval request in the request's `messages` (approved, or denied with its reason),
 * as the guarded tools of `idempotentTools` would. Call it in your route before
 * `generateText`/`streamText`: a denial then stands at once, even when nothing of its
 * request runs (a lone denial the model answers in text), so a resubmission that flips it
 * to approved never runs the call. Without it, a denial is recorded by the first guarded
 * tool that runs with it in its messages (the same request's approved sibling, or any
 * later request). The first decision for a call wins; recording one again changes nothing.
 */
export async function recordApprovalResponses(messages: unknown, options: RecordApprovalResponsesOptions): Promise<void> {
  const where = 'idempotent-tools/ai-sdk: recordApprovalResponses(messages, { scope })';
  if (options === null || typeof options !== 'object') throw new TypeError(`${where}: options must be an object such as { scope: chatId }, not ${describe(options)}`);
  const { scope, store, ttlMs } = options;
  if (scope === undefined || scope === null || scope === '') {
    throw new TypeError(`${where}: "scope" is ${describe(scope)}; give the chat id your tools' "scope" option gives.`);
  }
  if (!Array.isArray(messages)) throw new TypeError(`${where}: messages must be the request's messages (an array), not ${describe(messages)}`);
  const responses = approvalResponsesIn(messages).map(({ message: _, ...d }) => d);
  if (responses.length === 0) return;
  await recordReported(store ?? defaultStore(), scope, responses, {
    source: 'ai-sdk',
    ttlMs,
    meta: (toolCallId) => ({ framework: 'ai-sdk', toolCallId, scope: scopeLabel(scope) }),
    emit: () => {},
  });
}
