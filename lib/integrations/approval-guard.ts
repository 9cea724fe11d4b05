/**
 * The approval check of a guarded tool call, just before it runs (only then: a replay runs
 * nothing, so it needs no check): records the decisions the framework reports (the first
 * decision for a call wins; see ../approvals.ts), then looks up the call's decisions and
 * says whether it may run.
 * - rejected: it never runs (the helper hands the framework its rejection-shaped answer);
 * - approved for other arguments: it does not run (`ApprovalMismatchError`, also an
 *   `approval-mismatch` event and a process warning);
 * - approved, or no decision: it runs, keyed as always, so every resume or resubmission of
 *   the approved call shares one record and runs it once.
 * No framework is imported here.
 */

import {
  type ApprovalDecision,
  type StoredDecision,
  approvalArgsFingerprint,
  decisionsFor,
  describeDecision,
  recordDecision,
} from '../core/approvals.js';
import { canonicalJson } from '../core/canonical.js';
import { ApprovalMismatchError, ToolCallRejectedError } from '../core/errors.js';
import type { IdempotencyEvent } from '../core/events.js';
import type { RecordMeta, Store } from '../core/store.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A decision the framework reported, as a helper read it: for the call about to run, or a sibling of its turn. */
export interface ReportedDecision {
  toolCallId: string;
  toolName: string;
  /** The arguments it covers: the model's (approve, reject), the edited ones (edit). */
  args: unknown;
  decision: ApprovalDecision;
  turn: string | null;
  by?: string;
  reason?: string;
}

/** The call about to run, as the approval check sees it. */
export interface ApprovalCall {
  /** The conversation, as `recordApproval` takes it (the thread id, the `scope` option's value). */
  scope: Json;
  /** The framework's id of the turn (AI message id, approvalId, output item id, run id), or null. */
  turn: string | null;
  toolCallId: string;
  toolName: string;
  /** The fingerprint of the arguments it runs with. */
  argsFingerprint: string;
  /** The scope of its execution key (with the turn): binds a decision recorded without a turn. */
  executionScope: Json;
}

/** Why a call does not run. */
export interface Refusal {
  kind: 'rejected' | 'mismatch';
  decision: StoredDecision;
  /** The rejection's reason (for the model's message), when one was given. */
  reason: string | null;
  error: ToolCallRejectedError | ApprovalMismatchError;
}

export interface CheckOptions {
  /** Which helper reports the decisions ('langchain', 'ai-sdk', ...). */
  source: string;
  ttlMs?: number;
  /** Where the decision's record says it came from (`inspect` shows it). */
  meta: (toolCallId: string) => RecordMeta;
  /** Publishes an event of the given tool call. */
  emit: (toolCallId: string, event: Omit<IdempotencyEvent, 'durationMs'>) => void;
}

const PAST = { approve: 'approved', edit: 'edited', reject: 'rejected' } as const;

/** The fingerprint of a reported decision's arguments; null when they cannot be fingerprinted (a rejection still counts). */
function fingerprintOr(toolName: string, args: unknown, fallback: string | null): string | null {
  try {
    return approvalArgsFingerprint(toolName, args);
  } catch {
    return fallback;
  }
}

/**
 * Records the decisions a framework reported for the calls of one turn (in the
 * conversation `scope`); returns what is recorded for each, the earlier decision where one
 * stood already.
 * @internal
 */
export async function recordReported(
  store: Store,
  scope: Json,
  reported: ReportedDecision[],
  o: CheckOptions,
  fallbackFingerprint?: (r: ReportedDecision) => string | null,
  /** Decisions whose outcome the caller does not need (not the running call's): skipped once this process saw them stand. */
  settledOnce?: (r: ReportedDecision) => boolean,
): Promise<Array<{ reported: ReportedDecision; stored: StoredDecision }>> {
  const out: Array<{ reported: ReportedDecision; stored: StoredDecision }> = [];
  let seen = standing.get(store);
  if (seen === undefined) standing.set(store, (seen = new Set()));
  for (const r of reported) {
    const argsFingerprint = fingerprintOr(r.toolName, r.args, fallbackFingerprint?.(r) ?? null);
    if (argsFingerprint === null && r.decision !== 'reject') continue; // an approval we cannot fingerprint: its own run records it
    const once = settledOnce?.(r) === true ? `${canonicalJson([scope, r.turn, r.toolCallId, r.toolName, r.decision, argsFingerprint])}` : undefined;
    if (once !== undefined && seen.has(once)) continue;
    const { outcome, stored } = await recordDecision(store, {
      scope,
      turn: r.turn,
      toolCallId: r.toolCallId,
      toolName: r.toolName,
      decision: r.decision,
      argsFingerprint,
      by: r.by ?? null,
      reason: r.reason ?? null,
      source: o.source,
      ttlMs: o.ttlMs,
      meta: o.meta(r.toolCallId),
    });
    if (outcome === 'recorded') o.emit(r.toolCallId, { type: PAST[r.decision], key: stored.key, name: r.toolName, decision: r.decision });
    if (once !== undefined) {
      if (seen.size >= STANDING_MAX) seen.clear();
      seen.add(once);
    }
    out.push({ reported: r, stored });
  }
  return out;
}

/**
 * Per store, the reported decisions this process already saw recorded (or refused for an
 * earlier one): a history carries its denials into every later request (AI SDK), and a
 * decision once recorded never changes, so each is written once per process, not once per
 * guarded call.
 */
const standing = new WeakMap<object, Set<string>>();
const STANDING_MAX = 10_000;

/**
 * Records `reported`, then decides whether `call` may run: undefined, or why not.
 * @internal
 */
export async function checkApproval(store: Store, call: ApprovalCall, reported: ReportedDecision[], o: CheckOptions): Promise<Refusal | undefined> {
  const isOwn = (r: ReportedDecision) => r.toolCallId === call.toolCallId && r.toolName === call.toolName && r.turn === call.turn;
  const recorded = await recordReported(store, call.scope, reported, o, (r) => (isOwn(r) ? call.argsFingerprint : null), (r) => !isOwn(r));
  const own = recorded.find((x) => isOwn(x.reported))?.stored;
  const decisions = await decisionsFor(store, call, call.executionScope, own);
  const rejected = decisions.find((d) => d.kind === 'rejected');
  if (rejected !== undefined) {
    const error = new ToolCallRejectedError(
      `idempotent-tools: tool "${call.toolName}" call ${call.toolCallId} was ${describeDecision(rejected)}; it does not run (a rejection is final).`,
      { key: rejected.key },
    );
    o.emit(call.toolCallId, { type: 'refused', key: rejected.key, name: call.toolName, decision: 'reject', error });
    return { kind: 'rejected', decision: rejected, reason: rejected.record?.reason ?? null, error };
  }
  const other = decisions.find((d) => d.kind === 'approved' && d.argsFingerprint !== call.argsFingerprint);
  if (other !== undefined) {
    const error = new ApprovalMismatchError(
      `idempotent-tools: tool "${call.toolName}" call ${call.toolCallId} is approved for other arguments than these (${describeDecision(other)}), so it did not run. ` +
        'Only the approved arguments run (an edit approves the edited ones); to run these, the call needs an approval of its own.',
      { key: other.key },
    );
    o.emit(call.toolCallId, { type: 'approval-mismatch', key: other.key, name: call.toolName, decision: other.record?.decision, error });
    process.emitWarning(error.message, { type: 'IdempotentToolsWarning', code: 'IDEMPOTENT_TOOLS_APPROVAL_MISMATCH' });
    return { kind: 'mismatch', decision: other, reason: null, error };
  }
  return undefined;
}

/**
 * A refusal on its way through the core: thrown inside the call's record (which then says
 * why, as a failed call that runs nothing when tried again), caught by the helper, which
 * hands the framework its answer.
 * @internal
 */
export class ApprovalRefusal extends Error {
  constructor(readonly refusal: Refusal, readonly owner: object) {
    super(refusal.error.message);
    this.name = refusal.error.name;
  }
}
