/**
 * What a thrown value means for the call's record. A framework's control-flow signal
 * (LangGraph's `interrupt()` throws GraphInterrupt; a handoff throws ParentCommand) is
 * not a failure; an abort after `fn` started leaves the outcome unknown (the request may
 * have been sent). No framework is imported: signals are recognised by shape.
 */

export type ThrownKind = 'failure' | 'control-flow' | 'aborted';

export function classifyThrown(thrown: unknown): ThrownKind {
  if (thrown === null || typeof thrown !== 'object') return 'failure';
  let name: unknown;
  try {
    name = (thrown as { name?: unknown }).name;
  } catch {
    return 'failure';
  }
  if (name === 'GraphInterrupt' || name === 'NodeInterrupt' || name === 'ParentCommand') return 'control-flow';
  if (name === 'AbortError') return 'aborted';
  return 'failure';
}
