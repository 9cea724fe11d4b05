/**
 * Approval decisions (approve, edit, reject) bound to one tool call, kept in the store.
 *
 * A decision is a record written through the public Store interface (`acquire`, then
 * `complete`), so every store keeps decisions as it keeps calls, and recording one is
 * atomic: the first decision for a call wins, and a later one that allows something else
 * is refused (recording the same decision again changes nothing). The reserved scheme,
 * also in docs/approvals.md:
 *
 * - key: `approval|<tool>|<tool call id>|<digest>`, the digest over the scope, the turn,
 *   the tool call id and the tool (readable first, so `inspect --key approval|charge`
 *   finds a tool's decisions by prefix);
 * - name: `approval:<approved|edited|rejected>:<tool>` (names starting `approval:` are
 *   reserved), so a listing shows the decision without reading results;
 * - fingerprint: what the decision allows, `approval:rejected` or
 *   `approval:approved:<fingerprint of the arguments>` (an edit approves the edited
 *   arguments, so approving and editing to the same arguments are one decision);
 * - result: the `ApprovalRecord`.
 *
 * The turn tells apart calls whose ids repeat (`call_0` every turn). A decision recorded
 * without one covers the call in the first turn that runs it: a second record,
 * `<key>|turn` (name `approval:turn:<tool>`), binds it to that turn.
 */

import { APPROVAL_NAME_PREFIX, type ApprovalDecision, PAST, decisionName, parseDecisionName } from './approval-names.js';
import { Unencodable, canonicalJson } from './canonical.js';
import { defaultStore } from './default-store.js';
import { ApprovalConflictError, asStoreError } from './errors.js';
import { type IdempotencyEvent, type IdempotencyEventType, publish } from './events.js';
import * as native from './native.js';
import { clearCommand } from './shell.js';
import type { IdempotencyRecord, RecordMeta, Store } from './store.js';

export { APPROVAL_NAME_PREFIX, decisionName, parseDecisionName };
export type { ApprovalDecision };

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const DECISIONS: readonly ApprovalDecision[] = ['approve', 'edit', 'reject'];

/** What `recordApproval` takes: which call, what was decided, and (when known) by whom and why. */
export interface ApprovalInput {
  /**
   * The conversation, as the tool's helper scopes it: the thread id (LangChain, LangGraph;
   * Mastra's memory thread), or the value of your `scope` option (AI SDK, OpenAI Agents, Mastra).
   */
  scope: Json;
  toolCallId: string;
  /** The tool's name, as the model calls it. */
  toolName: string;
  /** The arguments the decision covers, as the model sent them (for `edit`, the edited ones). Required to approve or edit. */
  args?: unknown;
  decision: ApprovalDecision;
  /**
   * The turn the call belongs to, when tool call ids repeat across turns: the AI message id
   * (LangChain, LangGraph), the `approvalId` (AI SDK), the output item id (OpenAI Agents),
   * the run id (Mastra). Without it, the decision covers the call in the first turn that runs it.
   */
  turn?: string | null;
  /** Who decided (a user id, an email). */
  by?: string;
  /** Why (a rejection's message reaches the model). */
  reason?: string;
  /** Forget the decision this long after it was recorded (as the calls' records are forgotten). Default: never. */
  ttlMs?: number;
}

/** A decision as the store keeps it (the record's result). */
export interface ApprovalRecord {
  decision: ApprovalDecision;
  scope: Json;
  turn: string | null;
  toolCallId: string;
  toolName: string;
  /** The fingerprint of the arguments the decision covers (null for a rejection made without them). */
  argsFingerprint: string | null;
  by: string | null;
  reason: string | null;
  /** When it was recorded, epoch ms. */
  decidedAt: number;
  /** Who reported it: a framework helper ('langchain', 'ai-sdk', 'openai-agents', 'mastra') or 'recordApproval'. */
  source: string;
}

/** What `recordApproval` returns: the call's decision (the one just given, or the same one recorded before). */
export interface RecordedApproval extends ApprovalRecord {
  /** The decision record's key (`inspect --key` shows it). */
  key: string;
  /** False when the same decision was already recorded (nothing changed). */
  recorded: boolean;
}

/** Which call a decision belongs to. */
export interface CallIdentity {
  scope: Json;
  turn: string | null;
  toolCallId: string;
  toolName: string;
}

/** A decision found in the store: what it allows, and the record when it has been written. */
export interface StoredDecision {
  key: string;
  kind: 'rejected' | 'approved';
  /** For an approval: the fingerprint of the arguments it allows. */
  argsFingerprint: string | null;
  /** The decision as recorded; null while its writer holds the claim and has not written it yet. */
  record: ApprovalRecord | null;
}

/** A decision to record, checked. @internal */
export interface DecisionToRecord extends CallIdentity {
  decision: ApprovalDecision;
  argsFingerprint: string | null;
  by: string | null;
  reason: string | null;
  source: string;
  ttlMs?: number;
  /** Shown by `inspect` (the scope as a label, the framework). */
  meta?: RecordMeta;
}

export type RecordOutcome = { outcome: 'recorded' | 'same' | 'conflict'; stored: StoredDecision };

/** Names and fingerprints of the scheme (the names: approval-names.ts). */
const REJECTED = 'approval:rejected';
const APPROVED = 'approval:approved:';
const TURN = 'approval:turn:';
/** How long a writer's claim on a decision lives: it completes it at once, so this only matters if it died in between. */
const CLAIM_MS = 30_000;

/** The key of a call's decision. */
export function approvalKey(call: CallIdentity): string {
  const digest = native
    .fingerprint('approval-call', canonicalJson({ scope: call.scope, turn: call.turn, toolCallId: call.toolCallId, toolName: call.toolName }))
    .slice(0, 32);
  return `approval|${call.toolName}|${call.toolCallId}|${digest}`;
}

/** The fingerprint of the arguments a decision covers (SHA-256 over the tool and their canonical JSON). */
export function approvalArgsFingerprint(toolName: string, args: unknown): string {
  return native.fingerprint(`${APPROVAL_NAME_PREFIX}${toolName}`, canonicalJson(args === undefined ? null : args));
}

function fingerprintOf(d: { decision: ApprovalDecision; argsFingerprint: string | null }): string {
  return d.decision === 'reject' ? REJECTED : `${APPROVED}${d.argsFingerprint}`;
}

/** What a decision record allows, from its fingerprint (and its result when written); undefined for a record of another kind. */
export function decodeDecision(record: IdempotencyRecord): StoredDecision | undefined {
  let kind: 'rejected' | 'approved';
  let argsFingerprint: string | null = null;
  if (record.fingerprint === REJECTED) kind = 'rejected';
  else if (record.fingerprint.startsWith(APPROVED)) {
    kind = 'approved';
    argsFingerprint = record.fingerprint.slice(APPROVED.length);
  } else return undefined;
  const written = record.status === 'completed' && record.result !== null && typeof record.result === 'object';
  return { key: record.key, kind, argsFingerprint, record: written ? (record.result as ApprovalRecord) : null };
}

/** Claims `key` and writes `value` at once. Returns the record in the way when the claim is refused. */
async function claimAndWrite(
  store: Store,
  request: { key: string; name: string; fingerprint: string; ttlMs?: number; meta?: RecordMeta },
  value: unknown,
): Promise<{ acquired: true } | { acquired: false; record: IdempotencyRecord }> {
  try {
    const claim = await store.acquire({ ...request, leaseMs: CLAIM_MS, force: false });
    if (!claim.acquired) return claim;
    // A refused complete means a writer of the same fingerprint took the claim over after
    // ours ran out (a takeover needs the same fingerprint): the same decision is recorded.
    await store.complete({ key: request.key, token: claim.token, resultJson: JSON.stringify(value), ttlMs: request.ttlMs });
    return { acquired: true };
  } catch (err) {
    if (err instanceof TypeError) throw err; // a key or name the store cannot keep: bad input
    throw asStoreError(err, request.key);
  }
}

/**
 * Records a decision; the first one for a call wins. `same`: that decision (or one that
 * allows the same) was recorded before; `conflict`: another one was, and stands.
 * @internal
 */
export async function recordDecision(store: Store, d: DecisionToRecord): Promise<RecordOutcome> {
  const key = approvalKey(d);
  const record: ApprovalRecord = {
    decision: d.decision,
    scope: d.scope,
    turn: d.turn,
    toolCallId: d.toolCallId,
    toolName: d.toolName,
    argsFingerprint: d.argsFingerprint,
    by: d.by,
    reason: d.reason,
    decidedAt: Date.now(),
    source: d.source,
  };
  const fingerprint = fingerprintOf(d);
  const written = await claimAndWrite(store, { key, name: decisionName(d.decision, d.toolName), fingerprint, ttlMs: d.ttlMs, meta: d.meta }, record);
  const mine: StoredDecision = {
    key,
    kind: d.decision === 'reject' ? 'rejected' : 'approved',
    argsFingerprint: d.decision === 'reject' ? null : d.argsFingerprint,
    record,
  };
  if (written.acquired) return { outcome: 'recorded', stored: mine };
  const stored = decodeDecision(written.record);
  if (stored === undefined) {
    throw new TypeError(`idempotent-tools: the key ${key} (reserved for approval decisions) holds a record of "${written.record.name}", not a decision; clear it (${clearCommand(key)}).`);
  }
  return { outcome: written.record.fingerprint === fingerprint ? 'same' : 'conflict', stored };
}

/**
 * Binds a decision recorded without a turn to the turn that first looks it up (its
 * execution scope): true when it is bound to `turnScope`, false when to another turn.
 */
async function bindToTurn(store: Store, key: string, toolName: string, turnScope: Json): Promise<boolean> {
  const fingerprint = `${TURN}${native.fingerprint('approval-turn', canonicalJson(turnScope))}`;
  const written = await claimAndWrite(store, { key: `${key}|turn`, name: `${APPROVAL_NAME_PREFIX}turn:${toolName}`, fingerprint }, { boundAt: Date.now() });
  return written.acquired || written.record.fingerprint === fingerprint;
}

async function read(store: Store, key: string): Promise<StoredDecision | undefined> {
  let record: IdempotencyRecord | null;
  try {
    record = await store.get(key);
  } catch (err) {
    if (err instanceof TypeError) throw err;
    throw asStoreError(err, key);
  }
  return record === null ? undefined : decodeDecision(record);
}

/**
 * The decisions that cover a call in the turn whose execution scope is `turnScope`: the one
 * recorded for its turn (`own`, when the caller just recorded or read it), and one recorded
 * without a turn, bound to this turn on first look (so it never covers a later turn's call
 * that reuses the id).
 * @internal
 */
export async function decisionsFor(store: Store, call: CallIdentity, turnScope: Json, own?: StoredDecision): Promise<StoredDecision[]> {
  const key = approvalKey({ ...call, turn: null });
  // Both looked up at once: one round trip to a remote store, not two.
  const [mine, loose] = await Promise.all([
    call.turn === null ? undefined : (own ?? read(store, approvalKey(call))),
    call.turn === null && own !== undefined ? own : read(store, key),
  ]);
  const found: StoredDecision[] = mine === undefined ? [] : [mine];
  if (loose !== undefined && (await bindToTurn(store, key, call.toolName, turnScope))) found.push(loose);
  return found;
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') return value === '' ? 'an empty string' : JSON.stringify(value);
  return Array.isArray(value) ? 'an array' : typeof value;
}

/** How a decision reads in a message: `approved (by alice: "looks right")`. */
export function describeDecision(stored: StoredDecision): string {
  const r = stored.record;
  if (r === null) return stored.kind;
  const who = r.by ? ` by ${r.by}` : '';
  const why = r.reason ? `: ${JSON.stringify(r.reason)}` : '';
  return `${PAST[r.decision]}${who}${why}`;
}

/**
 * `recordApproval(store, { scope, toolCallId, toolName, args, decision, turn?, by?, reason? })`:
 * records a decision your own UI made about a tool call, so the guarded tool runs only as
 * decided: a rejected call never runs, an approved one runs once and only with the approved
 * arguments (an edit approves the edited ones). The first decision for a call wins:
 * recording it again is a no-op, another decision is an `ApprovalConflictError`.
 * `store` defaults to `defaultStore()`. Returns the call's decision.
 */
export async function recordApproval(store: Store | undefined, input: ApprovalInput): Promise<RecordedApproval> {
  const where = 'idempotent-tools: recordApproval(store, decision)';
  const s = store ?? defaultStore();
  if (s === null || typeof s !== 'object' || typeof s.acquire !== 'function' || typeof s.complete !== 'function' || typeof s.get !== 'function') {
    throw new TypeError(`${where}: store must be a store (SqliteStore, RedisStore, PostgresStore, MemoryStore), not ${describeValue(s)}`);
  }
  if (input === null || typeof input !== 'object') throw new TypeError(`${where}: the decision must be an object { scope, toolCallId, toolName, args, decision }, not ${describeValue(input)}`);
  const known = new Set(['scope', 'toolCallId', 'toolName', 'args', 'decision', 'turn', 'by', 'reason', 'ttlMs']);
  for (const k of Object.keys(input)) if (!known.has(k)) throw new TypeError(`${where}: "${k}" is not a field; the fields are ${[...known].join(', ')}`);
  const { scope, toolCallId, toolName, args, decision, turn = null, by, reason, ttlMs } = input;
  if (scope === undefined || scope === null || scope === '') {
    throw new TypeError(`${where}: "scope" is ${describeValue(scope)}; give the conversation the call belongs to, as its tool's helper scopes it (the thread id, or your "scope" option's value).`);
  }
  try {
    canonicalJson(scope);
  } catch (err) {
    if (!(err instanceof Unencodable)) throw err;
    throw new TypeError(`${where}: "scope" cannot be keyed: ${err.pathFrom('scope')} is ${err.what}; give a string id or JSON data.`);
  }
  for (const [field, value] of [['toolCallId', toolCallId], ['toolName', toolName]] as const) {
    if (typeof value !== 'string' || value === '') throw new TypeError(`${where}: "${field}" must be a non-empty string, not ${describeValue(value)}`);
  }
  if (!DECISIONS.includes(decision)) throw new TypeError(`${where}: "decision" must be "approve", "edit" or "reject", not ${describeValue(decision)}`);
  if (turn !== null && (typeof turn !== 'string' || turn === '')) {
    throw new TypeError(`${where}: "turn" must be a non-empty string (the AI message id, approvalId, output item id or run id) or null, not ${describeValue(turn)}`);
  }
  for (const [field, value] of [['by', by], ['reason', reason]] as const) {
    if (value !== undefined && typeof value !== 'string') throw new TypeError(`${where}: "${field}" must be a string, not ${describeValue(value)}`);
  }
  if (ttlMs !== undefined && (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0)) {
    throw new TypeError(`${where}: "ttlMs" must be a number of milliseconds > 0, not ${describeValue(ttlMs)}`);
  }
  if (decision !== 'reject' && args === undefined) {
    throw new TypeError(`${where}: "args" is required to ${decision}: the decision covers those arguments only (for an edit, the edited ones).`);
  }
  let argsFingerprint: string | null = null;
  if (args !== undefined) {
    try {
      argsFingerprint = approvalArgsFingerprint(toolName, args);
    } catch (err) {
      if (!(err instanceof Unencodable)) throw err;
      throw new TypeError(`${where}: "args" cannot be fingerprinted: ${err.pathFrom('args')} is ${err.what}; give the arguments as the model sent them (JSON data).`);
    }
  }
  const d: DecisionToRecord = {
    scope,
    turn,
    toolCallId,
    toolName,
    decision,
    argsFingerprint,
    by: by ?? null,
    reason: reason ?? null,
    source: 'recordApproval',
    ttlMs,
    meta: { scope: typeof scope === 'string' ? scope : JSON.stringify(scope), toolCallId },
  };
  const { outcome, stored } = await recordDecision(s, d);
  if (outcome === 'conflict') {
    throw new ApprovalConflictError(
      `${where}: tool "${toolName}" call ${toolCallId} already has a decision (${describeDecision(stored)}); the first decision stands. ` +
        (turn === null
          ? 'If this is a later turn whose tool call reuses the id, pass "turn" (the AI message id, approvalId, output item id or run id).'
          : 'To run the tool otherwise, let the model make a new call.'),
      { key: stored.key },
    );
  }
  if (outcome === 'recorded') publishDecision(undefined, stored, d.toolName, 0);
  // The same decision, still being written by another caller: what it allows is this one.
  const kept: ApprovalRecord = stored.record ?? {
    decision, scope, turn, toolCallId, toolName, argsFingerprint, by: d.by, reason: d.reason, decidedAt: Date.now(), source: d.source,
  };
  return { ...kept, key: stored.key, recorded: outcome === 'recorded' };
}

/** The event of a recorded decision: `approved`, `edited` or `rejected`. @internal */
export function publishDecision(
  onEvent: ((event: IdempotencyEvent) => void) | undefined,
  stored: StoredDecision,
  toolName: string,
  durationMs: number,
  extra: Record<string, unknown> = {},
): void {
  const decision = stored.record?.decision ?? (stored.kind === 'rejected' ? 'reject' : 'approve');
  const type: IdempotencyEventType = PAST[decision];
  publish(onEvent, { type, key: stored.key, name: toolName, durationMs, decision, ...extra });
}
