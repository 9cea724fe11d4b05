/**
 * `idempotent-tools/mastra`: idempotent `execute` functions for Mastra 1.x tools
 * (`execute(inputData, context)`, the call id at `context.agent.toolCallId`).
 * Imports nothing from `@mastra/core`: it only reads the context object.
 *
 * An approved or resumed Mastra tool runs again from its first line with the same
 * toolCallId. Tool call ids are only unique within one conversation, so the key also needs
 * a scope: by default the memory thread (`context.agent.threadId`, with `resourceId`);
 * without memory, pass a `scope` (e.g. from `context.requestContext`).
 *
 * ```ts
 * import { createTool } from '@mastra/core/tools';
 * import { idempotentTool } from 'idempotent-tools/mastra';
 *
 * const sendPayment = createTool({
 *   id: 'send-payment',
 *   inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
 *   requireApproval: true,
 *   execute: idempotentTool(async function sendPayment({ orderId, cents }) { ... }),
 * });
 * ```
 */

import { CannotTellError, ambiguousReplayOf, openingWithNumberedId, turnOfAiSdkCall } from './identity.js';
import { type Json, type Scope, type ToolHelperOptions, type ToolSetChoices, copyTool, describe, idOf, resolveScope, toolSetOptions, wrapToolCall } from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome, ToolReconcileRequest, ToolReconcileAnswer } from './shared.js';

/** The parts of Mastra's `ToolExecutionContext` this helper reads. */
export interface MastraContextLike {
  agent?: { toolCallId?: string; threadId?: string; resourceId?: string; agentId?: string; suspend?: unknown; messages?: unknown[] };
  abortSignal?: unknown;
  requestContext?: unknown;
  workflow?: { runId?: string };
  /** The agent run's id (what approveToolCall and declineToolCall take). */
  runId?: string;
}

/** A tool's `requireApproval`, as `createTool` keeps it. */
type RequireApproval = boolean | ((input: any, context: any) => boolean | Promise<boolean>) | undefined;

export interface MastraToolOptions<I, R> extends ToolHelperOptions<I, R> {
  /**
   * The conversation or run the call belongs to: a JSON value, or a function of
   * `(inputData, context)`. Default: the agent's memory thread (`context.agent.threadId`
   * and `resourceId`); required when the agent runs without memory.
   */
  scope?: Scope<[I, MastraContextLike]>;
}

const HINT =
  'give the agent memory (then context.agent.threadId is the scope), or pass { scope: (input, context) => context.requestContext.get("conversationId") }.';

/**
 * Wraps a Mastra tool `execute(inputData, context)`: the key comes from the scope,
 * `context.agent.toolCallId` and the input; the context object is passed through but never
 * serialized into the key. A call without `context.agent.toolCallId` (called by hand, or
 * from a workflow step rather than an agent) or without a scope is a TypeError.
 */
export function idempotentTool<I, R>(
  fn: (inputData: I, context: MastraContextLike) => R,
  options?: MastraToolOptions<I, R>,
): (inputData: I, context: MastraContextLike) => Promise<Awaited<R>> {
  return wrapMastra(fn, options, undefined);
}

/**
 * `idempotentTool`, knowing the tool's `requireApproval` (`idempotentTools` sees the tool):
 * a call of a tool that needs approval runs only once Mastra has it approved
 * (approveToolCall), so its run records that approval, bound to the run and the arguments.
 */
function wrapMastra<I, R>(
  fn: (inputData: I, context: MastraContextLike) => R,
  options: MastraToolOptions<I, R> | undefined,
  requireApproval: RequireApproval,
): (inputData: I, context: MastraContextLike) => Promise<Awaited<R>> {
  const { scope, ...rest } = options ?? {};
  const toolName = (typeof rest.name === 'string' && rest.name !== '' ? rest.name : fn.name) as string;
  return wrapToolCall<I, [MastraContextLike], R>(
    {
      name: 'mastra',
      generator: 'last-yield',
      carriesToolName: false,
      // A tool that calls context.agent.suspend() runs again from the top on resume: that
      // run is not a completion (else the resumed run would replay it and never act).
      prepare: ([context], suspended) => {
        const suspend = context?.agent?.suspend;
        if (typeof suspend !== 'function') return [context];
        const agent = context.agent!;
        return [{ ...context, agent: { ...agent, suspend: (...args: unknown[]) => (suspended(), suspend.apply(agent, args)) } }];
      },
      identify: (input, [context]) => {
        const agent = context !== null && typeof context === 'object' ? context.agent : undefined;
        const toolCallId = idOf(agent?.toolCallId);
        if (toolCallId === undefined) {
          throw new TypeError(
            'idempotent-tools/mastra: the tool was called without context.agent.toolCallId (its second argument is ' +
              `${context === null || typeof context !== 'object' ? describe(context) : 'a context without agent.toolCallId'}). ` +
              'Let a Mastra agent call it; in a workflow step, wrap the function with idempotent() and a context of the run id instead.',
          );
        }
        let scoped: Json;
        let approvalScope: Json;
        if (scope !== undefined) {
          scoped = resolveScope('mastra', scope, [input, context], HINT);
          approvalScope = scoped;
        } else {
          const threadId = idOf(agent?.threadId);
          if (threadId === undefined) {
            throw new TypeError(
              'idempotent-tools/mastra: no scope: the agent has no memory thread (context.agent.threadId is undefined) and no "scope" option was given. ' +
                `Tool call ids are only unique within one conversation; ${HINT}`,
            );
          }
          scoped = { thread: threadId, resource: idOf(agent?.resourceId) ?? null };
          approvalScope = threadId;
        }
        // The turn: the run (approveToolCall resumes it under its id; a later turn is another
        // run), and within it the step that made the call, read as for the AI SDK, whose
        // message format Mastra passes (never a position: memory caps the history it sends).
        // Call ids that repeat every turn, or every step, are other calls.
        const runId = idOf(context.runId) ?? null;
        const turn = turnOfAiSdkCall(agent?.messages, toolCallId);
        return {
          framework: 'mastra',
          toolCallId,
          signal: context.abortSignal,
          scope: { conversation: scoped, run: runId, turn: turn?.turn ?? 'none' },
          conversation: { conversation: scoped },
          approvalScope,
          // The run: approveToolCall resumes it under the same id; a later turn is another run.
          turn: runId,
          ...(turn === undefined
            ? { turnUnknown: new CannotTellError('key', `idempotent-tools/mastra: tool call ${toolCallId} came without context.agent.messages, so nothing tells its step (call ids may repeat every step). Let a Mastra agent call it, or give the tool a business key: { key: (input) => \`order-\${input.orderId}\` }.`) }
            : runId !== null
              ? {} // the run tells requests apart (a resumed run keeps its id): within it the turn grows step by step
              : { turnUnknown: openingWithNumberedId('idempotent-tools/mastra', turn, toolCallId), ambiguousReplay: ambiguousReplayOf(turn, undefined) }),
        };
      },
      approvals: {
        reported: async (input, [context], site) => {
          if (requireApproval === undefined || requireApproval === false) return [];
          if (typeof requireApproval === 'function' && !(await askedAsMastraAsks(requireApproval, input, context))) return [];
          return [{ toolCallId: site.toolCallId, toolName, args: input, decision: 'approve', turn: site.turn ?? null }];
        },
      },
    },
    fn,
    rest as MastraToolOptions<I, R> & Record<string, unknown>,
  ) as (inputData: I, context: MastraContextLike) => Promise<Awaited<R>>;
}

/**
 * A tool's `requireApproval` function, asked as Mastra 1.x asks it before the call:
 * `(input, { args, requestContext, workspace })` with the request context as a plain object
 * (the tool's `execute` gets the `RequestContext` itself, whose values a plain-object reader
 * does not see). A function that throws required approval, as for Mastra (which asked the user).
 */
async function askedAsMastraAsks(requireApproval: (input: any, context: any) => boolean | Promise<boolean>, input: unknown, context: MastraContextLike): Promise<boolean> {
  const requestContext = context?.requestContext;
  const entries = (requestContext as { entries?: unknown } | null | undefined)?.entries;
  const plain = typeof entries === 'function' ? Object.fromEntries(entries.call(requestContext) as Iterable<[string, unknown]>) : requestContext;
  const workspace = (context as { workspace?: unknown } | undefined)?.workspace;
  try {
    return Boolean(await requireApproval(input, { args: input, requestContext: plain, ...(workspace === undefined ? {} : { workspace }) }));
  } catch {
    return true;
  }
}

/** The options of `idempotentTools`: every tool's options, and per-tool choices. */
export type MastraToolSetOptions = Omit<MastraToolOptions<any, unknown>, 'name'> & ToolSetChoices<Partial<MastraToolOptions<any, unknown>>>;

/**
 * Wraps every tool of a Mastra agent's `tools` (a record by name, as `new Agent({ tools })`
 * takes it, or an array of tools, named by their `id`): each tool with an `execute` gets an
 * idempotent one (as `idempotentTool` makes it, named after its name in the set); tools
 * without `execute`, those in `readOnly` and those with `tools: { name: false }` are left as
 * they are. Returns a new record (or array); the tools passed in are not changed.
 */
export function idempotentTools<T extends Record<string, unknown> | readonly unknown[]>(tools: T, options?: MastraToolSetOptions): T {
  const where = 'idempotent-tools/mastra';
  if (tools === null || typeof tools !== 'object') {
    throw new TypeError(`${where}: idempotentTools(tools, options) takes an agent's tools (a record by name, or an array), not ${describe(tools)}`);
  }
  const entries: Array<[string, unknown]> = Array.isArray(tools)
    ? tools.map((t, i) => [idOf((t as { id?: unknown } | null)?.id) ?? `#${i}`, t])
    : Object.entries(tools);
  const optionsOf = toolSetOptions<MastraToolOptions<any, unknown>>(where, entries.map(([n]) => n), options);
  const wrapped = entries.map(([name, tool]): [string, unknown] => {
    const execute = (tool as { execute?: unknown } | null)?.execute;
    const own = optionsOf(name);
    if (typeof execute !== 'function' || own === undefined) return [name, tool];
    const requireApproval = (tool as { requireApproval?: RequireApproval }).requireApproval;
    return [name, copyTool(tool as object, { execute: wrapMastra(execute as (input: unknown, c: MastraContextLike) => unknown, own, requireApproval) })];
  });
  return (Array.isArray(tools) ? wrapped.map(([, t]) => t) : Object.fromEntries(wrapped)) as unknown as T;
}
