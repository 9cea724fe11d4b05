/**
 * The record names of approval decisions: `approval:<approved|edited|rejected>:<tool>`
 * (and `approval:turn:<tool>` for a decision's binding to its turn), with the decision
 * type: what listings (record-query.ts, which the stores' fallback listing uses) and the
 * applications read, apart from approvals.ts, which writes and reads the decisions.
 */

/** What a human decided about a tool call. */
export type ApprovalDecision = 'approve' | 'edit' | 'reject';

export const APPROVAL_NAME_PREFIX = 'approval:';

export const PAST: Record<ApprovalDecision, 'approved' | 'edited' | 'rejected'> = { approve: 'approved', edit: 'edited', reject: 'rejected' };

/** The record name of a decision: `approval:<approved|edited|rejected>:<tool>`. */
export function decisionName(decision: ApprovalDecision, toolName: string): string {
  return `${APPROVAL_NAME_PREFIX}${PAST[decision]}:${toolName}`;
}

/** A record name of the scheme, read back: which decision, which tool (undefined for other names). */
export function parseDecisionName(name: string): { decision: 'approved' | 'edited' | 'rejected' | 'turn'; toolName: string } | undefined {
  const m = /^approval:(approved|edited|rejected|turn):(.*)$/s.exec(name);
  return m === null ? undefined : { decision: m[1] as 'approved' | 'edited' | 'rejected' | 'turn', toolName: m[2] };
}
