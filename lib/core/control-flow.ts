/**
 * What a thrown value means for the call's record. A framework's control-flow signal
 * (LangGraph's `interrupt()` throws GraphInterrupt; a handoff to a parent graph throws
 * ParentCommand; both are LangGraph "bubble-up" errors) is not a failure; an abort after
 * `fn` started leaves the outcome unknown (the request may have been sent). No framework
 * is imported: signals are recognised by shape, and a framework helper that sees its own
 * abort signal fire marks what the tool threw (`markAborted`), whatever its shape.
 */

export type ThrownKind = 'failure' | 'control-flow' | 'aborted';

/**
 * A tool that suspended itself (Mastra's `context.agent.suspend()`, which returns rather
 * than throws): the framework runs it again from the top on resume, so its run is control
 * flow, not a completion. A helper throws this through the wrapper (so the record is not
 * completed) and hands `value` back to the framework.
 */
export class ToolSuspended extends Error {
  override readonly name = 'ToolSuspended';
  constructor(readonly value: unknown) {
    super('the tool suspended itself; it runs again on resume');
  }
}

/** LangGraph's bubble-up errors by name (GraphBubbleUp's subclasses set `name`). */
const CONTROL_FLOW_NAMES = new Set(['ToolSuspended', 'GraphInterrupt', 'NodeInterrupt', 'ParentCommand', 'GraphBubbleUp', 'GraphDrained']);

/**
 * Abort shapes: the DOM's AbortError (fetch, AbortSignal), its TimeoutError
 * (AbortSignal.timeout), Node's AbortError (code ABORT_ERR), and the names the AI SDK's
 * own `isAbortError` accepts (ResponseAborted, from Next.js).
 */
const ABORT_NAMES = new Set(['AbortError', 'TimeoutError', 'ResponseAborted']);

/** Values a framework helper saw thrown while its framework's abort signal had fired. */
const aborted = new WeakSet<object>();

/** Marks `thrown` as an abort: thrown while the framework had aborted the call. */
export function markAborted(thrown: unknown): void {
  if (thrown !== null && (typeof thrown === 'object' || typeof thrown === 'function')) aborted.add(thrown);
}

function read(value: object, property: string): unknown {
  try {
    return (value as Record<string, unknown>)[property];
  } catch {
    return undefined; // a throwing getter or a revoked proxy: not a signal
  }
}

function isAbortShaped(value: object): boolean {
  const name = read(value, 'name');
  return (typeof name === 'string' && ABORT_NAMES.has(name)) || read(value, 'code') === 'ABORT_ERR';
}

export function classifyThrown(thrown: unknown): ThrownKind {
  if (thrown === null || (typeof thrown !== 'object' && typeof thrown !== 'function')) return 'failure';
  const name = read(thrown, 'name');
  if ((typeof name === 'string' && CONTROL_FLOW_NAMES.has(name)) || read(thrown, 'is_bubble_up') === true) return 'control-flow';
  if (aborted.has(thrown) || isAbortShaped(thrown)) return 'aborted';
  // A library that wraps the abort it saw (`new Error('request aborted', { cause })`).
  const cause = read(thrown, 'cause');
  if (cause !== null && typeof cause === 'object' && isAbortShaped(cause)) return 'aborted';
  return 'failure';
}
