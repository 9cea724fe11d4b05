/** `inspect`: the records that match the filters, one record by key or key prefix, or `--follow`. */

import { forTerminal as t } from '../terminal-text.js';
import type { ChangeSignal } from './changes.js';
import { candidates, count, detail, table } from './format.js';
import { follow } from './follow.js';
import { findByKey, keyIdSecrets, queryRecords, withKeyIds, type RecordQuery, type IdempotencyRecord, type Store, type StoreStats } from '../library.js';

export type OutputMode = 'text' | 'json' | 'jsonl';

/** A refusal: a message on stderr and exit code 1. */
export class InspectRefusal extends Error {}

/**
 * The record that `key` (a whole key or a unique prefix) names; refuses with the candidates
 * otherwise. `elsewhere`: where else such a record may be (another Redis prefix), said
 * when there is none.
 */
export async function recordByKey(store: Store, where: string, key: string, elsewhere?: string): Promise<IdempotencyRecord> {
  const found = await findByKey(store, key);
  if ('found' in found) return found.found;
  if ('ambiguous' in found) throw new InspectRefusal(candidates(key, found.ambiguous));
  throw new InspectRefusal(`no record with key ${t(key)} in ${t(where)}${elsewhere === undefined ? '' : `\n${elsewhere}`}`);
}

export interface InspectOptions {
  query: RecordQuery;
  mode: OutputMode;
  out: (text: string) => void;
  err: (text: string) => void;
  /** For `--follow`: how to learn of changes (opened on demand). */
  follow?: () => Promise<ChangeSignal>;
  /** A store that shows one project's records of a shared file (see `ProjectScope`). */
  project?: ProjectScope;
  /** How expired records leave this store, said after the table when some are still there ("delete it with: …"). */
  expiredAdvice?: (count: number) => string;
  /** Whether the store's stats are cheap enough to count what a filter hides (not on Redis, where they read every record). */
  countHidden?: boolean;
  /** Said on stderr when the store holds no record at all: where else they may be (another Redis prefix). */
  elsewhere?: string;
}

/** One project's view of a SQLite file that holds other projects' records too. */
export interface ProjectScope {
  name: string;
  /** The file's path, for the flag that shows every project's records. */
  path: string;
  /** How many unexpired records of other projects the file holds (not shown). */
  otherProjects: () => Promise<number>;
}

/**
 * The store's stats counting calls only: the records of its key-id secrets (one per
 * project of a shared SQLite file) are the library's own, not calls, and no listing shows
 * them, so no count does either. Null when the store keeps no stats.
 */
export async function callStats(store: Store): Promise<StoreStats | null> {
  if (store.stats === undefined) return null;
  const s = await store.stats();
  const secrets = (await keyIdSecrets(store)).size;
  return { ...s, completed: Math.max(0, s.completed - secrets) };
}

/** Unexpired records a store holds, by its stats (null when it keeps none), its key-id secrets left out. */
export async function visibleCount(store: Store): Promise<number | null> {
  const s = await callStats(store);
  return s === null ? null : s.pending + s.completed + s.failed;
}

const FILTER_FLAGS: Array<[keyof RecordQuery, string]> = [
  ['name', '--name'], ['status', '--status'], ['scope', '--scope'], ['sinceMs', '--since'], ['keyPrefix', '--key'],
];

/**
 * What the filters and the project leave out, as notes for stderr: a listing that shows
 * nothing (or less) must say so when the store holds records a call would see, or
 * records of other projects, and name the flag that shows them.
 */
async function hiddenNotes(store: Store, where: string, query: RecordQuery, matched: number, o: InspectOptions): Promise<string[]> {
  const notes: string[] = [];
  const { project } = o;
  const flags = FILTER_FLAGS.filter(([k]) => query[k] !== undefined).map(([, f]) => f);
  if (flags.length > 0 && o.countHidden === true) {
    const total = await visibleCount(store);
    const hidden = total === null ? 0 : total - matched;
    if (hidden > 0) {
      notes.push(`(${count(hidden, 'more record')} in ${where}${project ? ` for project ${JSON.stringify(project.name)}` : ''} ` +
        `${hidden === 1 ? 'does' : 'do'} not match ${flags.join(' ')}; leave ${flags.length === 1 ? 'it' : 'them'} out to see ${hidden === 1 ? 'it' : 'them'})`);
    }
  }
  if (project !== undefined) {
    const others = await project.otherProjects();
    if (others > 0) {
      notes.push(`(${count(others, 'record')} of other projects in ${project.path} ${others === 1 ? 'is' : 'are'} not shown: ` +
        `this is project ${JSON.stringify(project.name)}'s view; --db ${project.path} shows every project's, --project NAME one project's)`);
    }
  }
  return notes;
}

/** After the table: expired records are hidden from it, so say how many the store still holds. */
async function noteExpired(store: Store, where: string, o: InspectOptions): Promise<void> {
  if (store.stats === undefined || o.expiredAdvice === undefined) return;
  const { expired } = await store.stats();
  if (expired === 0) return;
  const are = expired === 1 ? '1 expired record is' : `${expired} expired records are`;
  o.err(`(${are} still in ${t(where)}: hidden from calls and from this list; ${o.expiredAdvice(expired)})`);
}

/**
 * Rows plain `inspect` shows when `--limit` is not given: the newest. A table of a million
 * rows is no use in a terminal, and reading it held every record in memory (issue 40: "plain
 * inspect pages instead of crashing"); `--json` and `--jsonl` still print every record.
 */
export const TABLE_ROWS = 1000;

export async function inspect(store: Store, where: string, o: InspectOptions): Promise<void> {
  const { query, mode, out } = o;
  if (o.follow !== undefined) {
    const changes = await o.follow();
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      await follow(store, where, { query, json: mode !== 'text', changes, stop: stop.signal, out, ready: o.err });
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await changes.close();
    }
    return;
  }
  const { keyPrefix, ...filters } = query;
  const onlyKey = keyPrefix !== undefined && Object.values(filters).every((v) => v === undefined);
  if (onlyKey) {
    const [r] = await withKeyIds(store, [await recordByKey(store, where, keyPrefix, o.elsewhere)]);
    out(mode === 'text' ? detail(r) : mode === 'json' ? JSON.stringify(r, null, 2) : JSON.stringify(r));
    return;
  }
  // The table shows no results: read without them. --json and --jsonl print records whole.
  // Without --limit, the table shows the newest TABLE_ROWS (the store reads only those).
  const capped = mode === 'text' && query.limit === undefined;
  const found = await queryRecords(store, capped ? { ...query, limit: TABLE_ROWS } : query, Date.now(), { withResults: mode !== 'text' });
  const { matched } = found;
  const records = await withKeyIds(store, found.records);
  if (mode === 'json') return out(JSON.stringify(records, null, 2));
  if (mode === 'jsonl') {
    if (records.length > 0) out(records.map((r) => JSON.stringify(r)).join('\n'));
    return;
  }
  if (records.length === 0) {
    const filtered = Object.values(query).some((v) => v !== undefined);
    const of = o.project ? ` for project ${t(JSON.stringify(o.project.name))}` : '';
    out(filtered ? `No records match in ${t(where)}${of}.` : `No records in ${t(where)}${of}.`);
    if (o.elsewhere !== undefined && !filtered) o.err(o.elsewhere);
  } else {
    out(table(records));
    if (matched > records.length) {
      o.err(capped
        ? `(the newest ${records.length} of ${matched} matching records shown; --limit N shows another number, --jsonl prints every record)`
        : `(${records.length} of ${matched} matching records shown; raise --limit to see more)`);
    }
  }
  for (const note of await hiddenNotes(store, where, query, matched, o)) o.err(t(note));
  await noteExpired(store, where, o);
}
