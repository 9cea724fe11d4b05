/** How `inspect` shows records: a table, one record in full, one line per settled call. */

import { forTerminal as t } from '../terminal-text.js';
import { invisiblesEscaped, statusLabel, type ApprovalRecord, type IdempotencyRecord, type RecordWithKeyId } from '../library.js';

/**
 * JSON text for the terminal: JSON.stringify escapes C0 controls in strings itself, but
 * leaves DEL, C1 and the invisible characters (bidirectional controls, zero-width ones:
 * see terminal-text.ts) raw; they become JSON escapes too (`\u202e`; a character past
 * U+FFFF as its two halves), so it stays JSON.
 */
function jsonForTerminal(text: string): string {
  return invisiblesEscaped(text, (c) => [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''));
}

/** `n` and the noun, singular or plural: "1 record", "2 records". */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

export function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export function took(ms: number | null): string {
  if (ms === null) return '-';
  return ms < 1000 ? `${Math.round(ms)}ms` : `${(ms / 1000).toFixed(1)}s`;
}

function expiry(r: IdempotencyRecord, now: number): string {
  return r.expiresAt === null ? 'never' : `in ${age(r.expiresAt - now)}`;
}

/**
 * For a pending record: until when its owner's claim holds. The record cannot say whether
 * the owner is alive (a killed one leaves its claim as it was): only that the claim holds
 * until then, that a running owner renews it before, and that one that stopped lets it go.
 */
export function leaseState(r: IdempotencyRecord, now: number): string | null {
  if (r.status !== 'pending' || r.leaseExpiresAt === null) return null;
  return r.leaseExpiresAt > now
    ? `held for ${age(r.leaseExpiresAt - now)} more: a running owner renews it before then; if its owner stopped, the next call after that takes it over`
    : `ran out ${age(now - r.leaseExpiresAt)} ago, its owner not heard from since (the next call takes it over)`;
}

/**
 * The longest length in `texts`, by a loop: `Math.max(...lengths)` passes each one as an
 * argument on the stack, which overflows ("Maximum call stack size exceeded") from about
 * 130k rows, and `inspect` lists every record that matches.
 */
function widest(texts: Iterable<string>): number {
  let width = 0;
  for (const text of texts) width = Math.max(width, text.length);
  return width;
}

function columns(rows: string[][]): string {
  const widths = rows[0].map((_, i) => widest(rows.map((row) => row[i])));
  return rows
    .map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ').trimEnd())
    .join('\n');
}

/** A keyed id as the CLI shows it: '-' while the store has no key-id secret. */
const shownId = (r: RecordWithKeyId) => r.keyId ?? '-';

export function table(records: RecordWithKeyId[], now = Date.now()): string {
  // The project column appears for stores that keep one (SQLite), so a shared default
  // file shows whose record is whose. ID is the keyed id that events, traces and logs carry.
  const projects = records.some((r) => r.namespace !== undefined);
  return columns([
    ['KEY', 'ID', 'NAME', 'STATUS', 'ATTEMPTS', 'AGE', 'TOOK', 'EXPIRES', 'SCOPE', ...(projects ? ['PROJECT'] : [])],
    ...records.map((r) => [
      t(r.key),
      shownId(r),
      t(r.name),
      statusLabel(r),
      String(r.attempts),
      age(now - r.createdAt),
      took(r.durationMs),
      expiry(r, now),
      t(r.meta?.scope ?? ''),
      ...(projects ? [r.namespace ? t(r.namespace) : '(none)'] : []),
    ]),
  ]);
}

export function detail(r: RecordWithKeyId, now = Date.now()): string {
  const lines: Array<[string, string]> = [
    ['key', t(r.key)],
    ['keyed id', r.keyId ?? '- (none yet: nothing has named this store\'s records by id)'],
    ['name', t(r.name)],
    ['status', statusLabel(r)],
    ['attempts', String(r.attempts)],
    ['created', `${new Date(r.createdAt).toISOString()} (${age(now - r.createdAt)} ago)`],
    ['updated', `${new Date(r.updatedAt).toISOString()} (${age(now - r.updatedAt)} ago)`],
    ['expires', r.expiresAt === null ? 'never' : new Date(r.expiresAt).toISOString()],
    ['fingerprint', t(r.fingerprint)],
  ];
  if (r.durationMs !== null) lines.push(['took', took(r.durationMs)]);
  const meta = r.meta ?? {};
  // One project line: the project the record lives in (SQLite), else the one its call recorded.
  if (r.namespace !== undefined) lines.push(['project', r.namespace ? t(r.namespace) : '(none)']);
  else if (meta.project) lines.push(['project', t(meta.project)]);
  if (meta.scope) lines.push(['scope', t(meta.scope)]);
  if (meta.toolCallId) lines.push(['tool call', t(meta.toolCallId)]);
  if (meta.framework) lines.push(['framework', t(meta.framework)]);
  if (meta.argsPreview) lines.push(['arguments', t(meta.argsPreview)]);
  const decision = decisionOf(r);
  if (decision !== undefined) {
    // An approval decision (approvals.ts): what was decided, by whom, why, for which turn.
    lines.push(['decision', t(decision.decision)]);
    if (decision.by) lines.push(['by', t(decision.by)]);
    if (decision.reason) lines.push(['reason', t(decision.reason)]);
    lines.push(['decided', new Date(decision.decidedAt).toISOString()]);
    lines.push(['turn', decision.turn === null ? '(any: the first turn that runs it)' : t(decision.turn)]);
    if (decision.argsFingerprint) lines.push(['covers args', t(decision.argsFingerprint)]);
    lines.push(['recorded by', t(decision.source)]);
  }
  if (r.leaseExpiresAt !== null) {
    const state = leaseState(r, now);
    lines.push(['lease until', `${new Date(r.leaseExpiresAt).toISOString()}${state ? ` (${state})` : ''}`]);
  }
  if (r.error !== null) lines.push(['error', t(`${r.error.name}: ${r.error.message}`)]);
  if (r.status === 'completed' && r.error === null && decision === undefined) {
    lines.push(['result', r.result === undefined ? 'undefined' : jsonForTerminal(JSON.stringify(r.result, null, 2))]);
  }
  const width = widest(lines.map(([k]) => k));
  return lines.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

/** A decision record's decision (its result), or undefined for any other record. */
function decisionOf(r: IdempotencyRecord): ApprovalRecord | undefined {
  const label = statusLabel(r);
  if (label === r.status || label === 'bound' || r.result === null || typeof r.result !== 'object') return undefined;
  const d = r.result as Partial<ApprovalRecord>;
  return typeof d.decision === 'string' && typeof d.decidedAt === 'number' && typeof d.source === 'string' ? (d as ApprovalRecord) : undefined;
}

/** The candidates of an ambiguous key prefix, as git lists them. */
export function candidates(prefix: string, records: IdempotencyRecord[]): string {
  const shown = records.slice(0, 20).map((r) => `  ${t(r.key)}  ${t(r.name)}  ${statusLabel(r)}`);
  if (records.length > shown.length) shown.push(`  … and ${records.length - shown.length} more`);
  return `the key prefix ${t(prefix)} is ambiguous; ${records.length} records start with it:\n${shown.join('\n')}\ngive more of the key`;
}

/** One settled call, for `inspect --follow`; `shownKey` is the key as the line names it ('' for none). */
export function followLine(r: IdempotencyRecord, shownKey = r.key): string {
  const parts = [new Date(r.updatedAt).toISOString(), statusLabel(r).padEnd(9), t(r.name), took(r.durationMs)];
  if (r.attempts > 1) parts.push(`attempt ${r.attempts}`);
  if (r.meta?.scope) parts.push(`scope ${t(r.meta.scope)}`);
  if (r.error !== null && r.status === 'failed') parts.push(t(`${r.error.name}: ${r.error.message}`));
  if (shownKey !== '') parts.push(t(shownKey));
  return parts.join('  ');
}
