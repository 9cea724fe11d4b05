/**
 * Finding records: the filters of `inspect` and of the inspector page (name, status,
 * scope, since, key prefix, limit), over any store's `listRecords`. Shared by the CLI and
 * the page so that one filter means one thing in both.
 */

import { parseDecisionName } from './approval-names.js';
import { KEY_ID_PREFIX, KEY_ID_SECRET_KEY, WITH_KEY_ID_SECRET, isInternalRecord, keyIdWith, secretOf } from './key-id.js';
import { keyIsAsGiven, keyStartsAsGiven } from './shown-text.js';
import type { IdempotencyRecord, RecentQuery, RecentRecords, RecordStatus, Store } from './store.js';

/**
 * A decision, as `--status` takes it: the approval records (see approvals.ts) with that
 * decision (`approved` includes edits: an edit approves the edited arguments), shown with
 * the executions of the same calls.
 */
export type DecisionStatus = 'approved' | 'edited' | 'rejected';

export interface RecordQuery {
  /** The function's name, exactly (with a decision status: the tool's). */
  name?: string;
  status?: RecordStatus | DecisionStatus;
  /** A thread, conversation or run: matches a record whose `meta.scope` is this, or has it as one `/`, `:` or `#`-separated part. */
  scope?: string;
  /** Only records changed (claimed or settled) within this many ms before now. */
  sinceMs?: number;
  /** A key or the start of one (as it is, or as shown: see shown-text.ts); or a keyed id (`kid_…`, what events and traces carry) or the start of one. */
  keyPrefix?: string;
  /** At most this many records, newest first. */
  limit?: number;
}

/** A filter value that cannot be understood; the message says what to give instead. */
export class QueryError extends Error {}

const STATUSES = new Set(['pending', 'completed', 'failed']);
const DECISIONS = new Set(['approved', 'edited', 'rejected']);

export function isDecisionStatus(status: string | undefined): status is DecisionStatus {
  return status !== undefined && DECISIONS.has(status);
}

/**
 * What a record's status column shows: its status, or for an approval record its decision
 * (`approved`, `edited`, `rejected`; `bound` for the record that binds a decision made
 * without a turn to the turn that ran it).
 */
export function statusLabel(r: Pick<IdempotencyRecord, 'name' | 'status'>): string {
  const decision = parseDecisionName(r.name);
  if (decision === undefined) return r.status;
  return decision.decision === 'turn' ? 'bound' : decision.decision;
}

/** A decision record with that decision (`approved` takes edits too), with its tool's name. */
function decisionMatch(r: IdempotencyRecord, status: DecisionStatus): string | undefined {
  const d = parseDecisionName(r.name);
  if (d === undefined || d.decision === 'turn') return undefined;
  return d.decision === status || (status === 'approved' && d.decision === 'edited') ? d.toolName : undefined;
}
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `90s`, `15m`, `1h`, `1h30m`, `2d`, `1w`: a duration in ms. */
export function parseSince(text: string): number {
  const parts = /^(?:\d+(?:\.\d+)?[smhdw])+$/.test(text.trim()) ? text.trim().match(/\d+(?:\.\d+)?[smhdw]/g)! : null;
  if (parts === null) {
    throw new QueryError(`--since ${JSON.stringify(text)} is not a duration; give one such as 90s, 15m, 1h, 1h30m, 2d or 1w`);
  }
  return parts.reduce((ms, p) => ms + Number(p.slice(0, -1)) * UNIT_MS[p.slice(-1)], 0);
}

/** Builds a query from text values (CLI flags, URL parameters); empty strings mean "not given". */
export function parseQuery(raw: { [k in 'name' | 'status' | 'scope' | 'since' | 'key' | 'limit']?: string | undefined }): RecordQuery {
  const given = (v: string | undefined) => (v === undefined || v === '' ? undefined : v);
  const q: RecordQuery = {};
  if (given(raw.name)) q.name = raw.name;
  if (given(raw.scope)) q.scope = raw.scope;
  if (given(raw.key)) q.keyPrefix = raw.key;
  const status = given(raw.status);
  if (status !== undefined) {
    if (!STATUSES.has(status) && !DECISIONS.has(status)) {
      throw new QueryError(`--status ${JSON.stringify(status)} is not a status; give pending, completed or failed (calls), or approved, edited or rejected (approval decisions)`);
    }
    q.status = status as RecordStatus | DecisionStatus;
  }
  const since = given(raw.since);
  if (since !== undefined) q.sinceMs = parseSince(since);
  const limit = given(raw.limit);
  if (limit !== undefined) {
    const n = Number(limit);
    if (!/^\d+$/.test(limit) || n < 1) throw new QueryError(`--limit ${JSON.stringify(limit)} is not a count; give a whole number >= 1`);
    q.limit = n;
  }
  return q;
}

/** Does `scope` (a record's `meta.scope`) belong to the thread/conversation/run `wanted`? */
export function scopeMatches(scope: string | undefined, wanted: string): boolean {
  if (scope === undefined) return false;
  if (scope === wanted) return true;
  return scope.split(/[/:#|]/).includes(wanted);
}

export function matches(r: IdempotencyRecord, q: RecordQuery, now: number): boolean {
  if (isDecisionStatus(q.status)) {
    const tool = decisionMatch(r, q.status);
    if (tool === undefined || (q.name !== undefined && tool !== q.name)) return false;
  } else {
    if (q.name !== undefined && r.name !== q.name) return false;
    if (q.status !== undefined && r.status !== q.status) return false;
  }
  if (q.scope !== undefined && !scopeMatches(r.meta?.scope, q.scope)) return false;
  if (q.sinceMs !== undefined && r.updatedAt < now - q.sinceMs) return false;
  if (q.keyPrefix !== undefined && !keyStartsAsGiven(r.key, q.keyPrefix)) return false;
  return true;
}

/** Newest change first; ties by key so the order is stable between looks. */
export function newestFirst(a: IdempotencyRecord, b: IdempotencyRecord): number {
  return b.updatedAt - a.updatedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

/**
 * `store.listRecent(query)`, or the same from `listRecords` for a store without it
 * (filtered, sorted and cut here; results dropped unless asked).
 */
export async function recentRecords(store: Pick<Store, 'listRecords' | 'listRecent'>, query: RecentQuery): Promise<RecentRecords> {
  const found = store.listRecent !== undefined ? await store.listRecent(query) : await listRecentFallback(store, query);
  // The store's key-id secret (and the package's other own records) are not calls.
  const records = found.records.filter((r) => !isInternalRecord(r));
  return records.length === found.records.length ? found : { records, matched: found.matched - (found.records.length - records.length) };
}

/**
 * The key-id secrets a store holds, by project (namespace; '' for stores without one): a
 * SQLite file shared by projects holds one per project, so a view of every project
 * tries them all.
 */
export async function keyIdSecrets(store: Pick<Store, 'listRecords' | 'listRecent'>): Promise<Map<string, string>> {
  const query = { name: KEY_ID_SECRET_KEY, withResults: true, [WITH_KEY_ID_SECRET]: true };
  const { records } = store.listRecent !== undefined ? await store.listRecent(query) : await listRecentFallback(store, query);
  const secrets = new Map<string, string>();
  for (const r of records) {
    const secret = secretOf(r); // only the secret's own record: a record planted at its key is ignored
    if (secret !== null) secrets.set(r.namespace ?? '', secret);
  }
  return secrets;
}

/** A record as `inspect` and the inspector page show it: with its keyed id. */
export type RecordWithKeyId = IdempotencyRecord & {
  /** The keyed id (`kid_…`) that events, traces, `mcp --log` and `inspect --follow` name
   * the record by; null while the store holds no key-id secret (nothing has asked for an
   * id yet, so no id of this record exists anywhere). */
  keyId: string | null;
};

/**
 * `records` with their keyed ids, each under the secret of its project (SQLite keeps one
 * per project; a record of the file's project-less records seen from a project's view gets
 * that project's, which its calls use).
 */
export async function withKeyIds(store: Pick<Store, 'listRecords' | 'listRecent'>, records: IdempotencyRecord[]): Promise<RecordWithKeyId[]> {
  if (records.length === 0) return [];
  const secrets = await keyIdSecrets(store);
  const only = secrets.size === 1 ? [...secrets.values()][0] : undefined;
  return records.map((r) => {
    const secret = secrets.get(r.namespace ?? '') ?? (r.namespace === '' || r.namespace === undefined ? only : undefined);
    return { ...r, keyId: secret === undefined ? null : keyIdWith(secret, r.key) };
  });
}

/**
 * How `keyPrefix` picks records: by the key's start (as it is, or as shown), or, for a
 * keyed id (`kid_…`), by the start of the record's keyed id under the store's secret
 * (none yet: nothing matches).
 */
async function keyMatcher(store: Pick<Store, 'listRecords' | 'listRecent'>, keyPrefix: string): Promise<(r: IdempotencyRecord) => boolean> {
  if (!keyPrefix.startsWith(KEY_ID_PREFIX)) return (r) => keyStartsAsGiven(r.key, keyPrefix);
  const secrets = [...(await keyIdSecrets(store)).values()];
  return (r) => keyStartsAsGiven(r.key, keyPrefix) || secrets.some((secret) => keyIdWith(secret, r.key).startsWith(keyPrefix));
}

/** `listRecent` over `listRecords`: what a store without its own query gives. */
export async function listRecentFallback(store: Pick<Store, 'listRecords'>, query: RecentQuery): Promise<RecentRecords> {
  const all = await store.listRecords({
    ...(query.status === undefined ? {} : { status: query.status }),
    ...((query as Record<symbol, unknown>)[WITH_KEY_ID_SECRET] === true ? { [WITH_KEY_ID_SECRET]: true } : {}),
  });
  const found = all
    .filter((r) => (query.name === undefined || r.name === query.name) && (query.updatedSince === undefined || r.updatedAt >= query.updatedSince))
    .sort(newestFirst);
  const kept = query.limit === undefined ? found : found.slice(0, query.limit);
  return { records: query.withResults ? kept : kept.map((r) => ({ ...r, result: undefined })), matched: found.length };
}

/**
 * The records that match, newest first, and how many matched before `limit` cut them.
 * Status, name, `since` (and `limit`, when nothing else filters) go into the store's own
 * query where it has one (`listRecent`); scope and key prefix are checked here.
 * `withResults: false` (the page, the table): records without their results.
 */
export async function queryRecords(
  store: Pick<Store, 'listRecords' | 'listRecent'>,
  q: RecordQuery,
  now = Date.now(),
  { withResults = true }: { withResults?: boolean } = {},
): Promise<{ records: IdempotencyRecord[]; matched: number }> {
  if (isDecisionStatus(q.status)) return decisionsBesideCalls(store, q, q.status, now, withResults);
  const pushed: RecentQuery = {
    status: q.status as RecordStatus | undefined,
    name: q.name,
    updatedSince: q.sinceMs === undefined ? undefined : now - q.sinceMs,
    withResults,
  };
  if (q.scope === undefined && q.keyPrefix === undefined) return recentRecords(store, { ...pushed, limit: q.limit });
  const { records } = await recentRecords(store, pushed);
  const keyMatches = q.keyPrefix === undefined ? () => true : await keyMatcher(store, q.keyPrefix);
  const found = records.filter((r) => matches(r, { ...q, keyPrefix: undefined }, now) && keyMatches(r));
  return { records: q.limit === undefined ? found : found.slice(0, q.limit), matched: found.length };
}

/**
 * `--status approved|edited|rejected`: the decisions that match, each followed by the
 * records of its call's executions (same tool, tool call id and scope: a refused run of a
 * rejected call, the run of an approved one), newest decision first.
 */
async function decisionsBesideCalls(
  store: Pick<Store, 'listRecords' | 'listRecent'>,
  q: RecordQuery,
  status: DecisionStatus,
  now: number,
  withResults: boolean,
): Promise<{ records: IdempotencyRecord[]; matched: number }> {
  const { records: all } = await recentRecords(store, { withResults });
  const decisions = all.filter((r) => matches(r, q, now));
  const shown = q.limit === undefined ? decisions : decisions.slice(0, q.limit);
  const callOf = (tool: string, r: IdempotencyRecord) => `${tool}\u0000${r.meta?.toolCallId ?? ''}\u0000${r.meta?.scope ?? ''}`;
  const executions = new Map<string, IdempotencyRecord[]>();
  for (const r of all) {
    if (parseDecisionName(r.name) !== undefined || r.meta?.toolCallId === undefined) continue;
    const list = executions.get(callOf(r.name, r)) ?? [];
    list.push(r);
    executions.set(callOf(r.name, r), list);
  }
  const records = shown.flatMap((d) => [d, ...(executions.get(callOf(decisionMatch(d, status)!, d)) ?? [])]);
  return { records, matched: decisions.length };
}

export type KeyLookup =
  | { found: IdempotencyRecord }
  | { ambiguous: IdempotencyRecord[] }
  | { missing: true };

/**
 * A whole key, or a unique start of one, as git takes commit hashes (as it is, or as
 * shown: see shown-text.ts); or a keyed id (`kid_…`) or a unique start of one.
 */
export async function findByKey(store: Pick<Store, 'get' | 'listRecords' | 'listRecent'>, keyOrPrefix: string): Promise<KeyLookup> {
  // Without a backslash, the text is a key as shown only when it is that key itself.
  if (!keyOrPrefix.includes('\\')) {
    const exact = await store.get(keyOrPrefix);
    if (exact !== null) return { found: exact };
  }
  const all = (await store.listRecords()).filter((r) => !isInternalRecord(r));
  // A whole key wins over keys it starts; one key's text may be another key as shown.
  const whole = all.filter((r) => keyIsAsGiven(r.key, keyOrPrefix)).sort(newestFirst);
  if (whole.length === 1) return { found: whole[0] };
  if (whole.length > 1) return { ambiguous: whole };
  const keyMatches = await keyMatcher(store, keyOrPrefix);
  const candidates = all.filter((r) => keyMatches(r)).sort(newestFirst);
  if (candidates.length === 0) return { missing: true };
  if (candidates.length === 1) return { found: candidates[0] };
  return { ambiguous: candidates };
}
