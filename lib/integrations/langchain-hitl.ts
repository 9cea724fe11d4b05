/**
 * What LangChain's `humanInTheLoopMiddleware` decided about the tool calls of one AI
 * message, read from the agent's checkpoints: the interrupt it raised (whose review
 * requests name the calls, with the arguments the model gave) and the resume that answered
 * it (`{ decisions: [{ type: 'approve' | 'edit' | 'reject', ... }] }`, in request order).
 * A guarded tool reads them when it is about to run, so the decisions are the ones of the
 * branch that is running (a resume, a replay, a fork), whoever resumed it and wherever.
 *
 * Only the checkpointer's public API is used (`getTuple`, `list`), reached through the run's
 * configurable (LangGraph's `__pregel_checkpointer`); without a checkpointer (no interrupts
 * either) there is nothing to read. Imports nothing from LangChain.
 */

import { canonicalJson } from '../core/canonical.js';
import type { Refusal, ReportedDecision } from './approval-guard.js';

interface CheckpointTupleLike {
  config?: { configurable?: Record<string, unknown> };
  checkpoint?: { id?: string; channel_values?: { messages?: unknown } };
  parentConfig?: { configurable?: Record<string, unknown> };
  pendingWrites?: Array<[string, string, unknown]>;
}

interface SaverLike {
  getTuple(config: unknown): Promise<CheckpointTupleLike | undefined>;
  list?(config: unknown, options?: unknown): AsyncIterable<CheckpointTupleLike>;
}

interface ToolCallLike {
  id?: unknown;
  name?: unknown;
  args?: unknown;
}

interface HitlDecisionLike {
  type?: unknown;
  editedAction?: { name?: unknown; args?: unknown };
  message?: unknown;
}

/** How far back from the running step the interrupt may be (HITL runs right after the model; other afterModel hooks may sit between). */
const MAX_STEPS_BACK = 8;

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/** The checkpoint namespace of the graph the running task belongs to: the task's own without its last part. */
function graphNamespace(taskNs: unknown): string {
  if (typeof taskNs !== 'string' || taskNs === '') return '';
  const parts = taskNs.split('|');
  parts.pop();
  return parts.join('|');
}

/** The checkpoint the running step started from, or (not yet written: durability 'async') the one before it. */
async function startingPoint(saver: SaverLike, threadId: unknown, ns: string, checkpointId: unknown): Promise<CheckpointTupleLike | undefined> {
  const config = { configurable: { thread_id: threadId, checkpoint_ns: ns, ...(typeof checkpointId === 'string' ? { checkpoint_id: checkpointId } : {}) } };
  const found = await saver.getTuple(config);
  if (found !== undefined || typeof checkpointId !== 'string' || saver.list === undefined) return found;
  for await (const before of saver.list({ configurable: { thread_id: threadId, checkpoint_ns: ns } }, { before: config, limit: 1 })) return before;
  return undefined;
}

function lastAiMessage(messages: unknown): { id?: unknown; tool_calls?: ToolCallLike[] } | undefined {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { tool_calls?: unknown; _getType?: () => string; getType?: () => string; type?: unknown } | null;
    if (m === null || typeof m !== 'object') continue;
    const type = typeof m.getType === 'function' ? m.getType() : typeof m._getType === 'function' ? m._getType() : m.type;
    if (type === 'ai') return m as { id?: unknown; tool_calls?: ToolCallLike[] };
  }
  return undefined;
}

function holds(messages: unknown, messageId: string): boolean {
  return Array.isArray(messages) && messages.some((m) => m !== null && typeof m === 'object' && (m as { id?: unknown }).id === messageId);
}

/** The review requests of a HITL interrupt among a checkpoint's writes, with the resume that answered them. */
function answeredReview(writes: Array<[string, string, unknown]>): { requests: Array<{ name?: unknown; args?: unknown }>; decisions: HitlDecisionLike[] } | undefined {
  for (const [taskId, channel, value] of writes) {
    if (channel !== '__interrupt__' || !Array.isArray(value)) continue;
    const interrupt = value[0] as { value?: { actionRequests?: unknown } } | undefined;
    const requests = interrupt?.value?.actionRequests;
    if (!Array.isArray(requests)) continue;
    const own = writes.find(([t, c]) => t === taskId && c === '__resume__');
    const resume = own !== undefined && Array.isArray(own[2]) ? own[2][0] : writes.find(([, c, v]) => c === '__resume__' && !Array.isArray(v))?.[2];
    const decisions = (resume as { decisions?: unknown } | undefined)?.decisions;
    if (Array.isArray(decisions) && decisions.length === requests.length) return { requests, decisions };
  }
  return undefined;
}

/**
 * The decisions HITL took for the tool calls of AI message `messageId` (approve: the
 * model's arguments; edit: the edited ones; reject: with its message as the reason), or []
 * when it asked nothing about them (or nothing can be read).
 */
export async function hitlDecisions(configurable: Record<string, unknown> | undefined, messageId: string | null): Promise<ReportedDecision[]> {
  const saver = configurable?.__pregel_checkpointer as SaverLike | undefined;
  if (messageId === null || saver === undefined || saver === null || typeof saver.getTuple !== 'function') return [];
  const ns = graphNamespace(configurable?.checkpoint_ns);
  const map = configurable?.checkpoint_map as Record<string, unknown> | undefined;
  let tuple = await startingPoint(saver, configurable?.thread_id, ns, map?.[ns] ?? configurable?.checkpoint_id);
  for (let step = 0; tuple !== undefined && step < MAX_STEPS_BACK; step++) {
    const messages = tuple.checkpoint?.channel_values?.messages;
    if (!holds(messages, messageId)) return []; // past the model step that made the message
    const review = answeredReview(tuple.pendingWrites ?? []);
    const message = lastAiMessage(messages);
    if (review !== undefined && message?.id === messageId && Array.isArray(message.tool_calls)) return decisionsOf(review, message.tool_calls, messageId);
    tuple = tuple.parentConfig === undefined ? undefined : await saver.getTuple(tuple.parentConfig);
  }
  return [];
}

/** Pairs the review requests (in the message's call order, as HITL made them) with its calls, and each with its decision. */
function decisionsOf(review: { requests: Array<{ name?: unknown; args?: unknown }>; decisions: HitlDecisionLike[] }, calls: ToolCallLike[], turn: string): ReportedDecision[] {
  const out: ReportedDecision[] = [];
  let next = 0;
  review.requests.forEach((request, i) => {
    while (next < calls.length && !(calls[next].name === request.name && sameJson(calls[next].args, request.args))) next++;
    const call = calls[next++];
    if (call === undefined || typeof call.id !== 'string' || typeof call.name !== 'string') return;
    const d = review.decisions[i];
    if (d?.type === 'approve') out.push({ toolCallId: call.id, toolName: call.name, args: call.args, decision: 'approve', turn });
    else if (d?.type === 'edit' && typeof d.editedAction?.name === 'string') {
      out.push({ toolCallId: call.id, toolName: d.editedAction.name, args: d.editedAction.args, decision: 'edit', turn });
    } else if (d?.type === 'reject') {
      out.push({ toolCallId: call.id, toolName: call.name, args: call.args, decision: 'reject', turn, reason: typeof d.message === 'string' ? d.message : undefined });
    }
  });
  return out;
}

/**
 * The ToolMessage the model gets for a call that did not run: for a rejection, the one
 * humanInTheLoopMiddleware makes (its message, else "User rejected the tool call for
 * `name` with id id"); for an approval of other arguments, what happened.
 */
export function refusalToolMessage(refusal: Refusal, call: { id: string; name: string }): unknown {
  const { ToolMessage } = require('@langchain/core/messages') as { ToolMessage: new (fields: Record<string, unknown>) => unknown };
  const content =
    refusal.kind === 'rejected'
      ? (refusal.reason ?? `User rejected the tool call for \`${call.name}\` with id ${call.id}`)
      : refusal.error.message;
  return new ToolMessage({ content, tool_call_id: call.id, name: call.name, status: 'error' });
}

/**
 * The id of the last AI message when some of its calls were answered with an error
 * ToolMessage (how humanInTheLoopMiddleware answers a rejected call; a tool error looks the
 * same, and costs only a look at the checkpoints); undefined otherwise.
 */
export function rejectedCallsMessage(messages: unknown): string | undefined {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { id?: unknown; tool_calls?: unknown; tool_call_id?: unknown; status?: unknown } | null;
    if (m === null || typeof m !== 'object') continue;
    if (!Array.isArray(m.tool_calls)) continue; // the last AI message decides (one without calls: nothing was rejected)
    const ids = new Set((m.tool_calls as ToolCallLike[]).map((c) => c.id));
    const answeredWithError = messages.slice(i + 1).some((t) => t !== null && typeof t === 'object' && (t as { status?: unknown }).status === 'error' && ids.has((t as { tool_call_id?: unknown }).tool_call_id));
    return answeredWithError && typeof m.id === 'string' ? m.id : undefined;
  }
  return undefined;
}
