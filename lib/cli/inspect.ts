/** `inspect`: the records that match the filters, one record by key or key prefix, or `--follow`. */

import { type RecordQuery, findByKey, queryRecords } from '../record-query.js';
import type { IdempotencyRecord, Store } from '../store.js';
import type { ChangeSignal } from './changes.js';
import { candidates, detail, table } from './format.js';
import { follow } from './follow.js';

export type OutputMode = 'text' | 'json' | 'jsonl';

/** A refusal: a message on stderr and exit code 1. */
export class InspectRefusal extends Error {}

/** The record that `key` (a whole key or a unique prefix) names; refuses with the candidates otherwise. */
export async function recordByKey(store: Store, where: string, key: string): Promise<IdempotencyRecord> {
  const found = await findByKey(store, key);
  if ('found' in found) return found.found;
  if ('ambiguous' in found) throw new InspectRefusal(candidates(key, found.ambiguous));
  throw new InspectRefusal(`no record with key ${key} in ${where}`);
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
}

/** One project's view of a SQLite file that holds other projects' records too. */
export interface ProjectScope {
  name: string;
  /** The file's path, for the flag that shows every project's records. */
  path: string;
  /** How many unexpired records of other projects the file holds (not shown). */
  otherProjects: () => Promise<number>;
}

/** Unexpired records a store holds, by its stats (null when it keeps none). */
export async function visibleCount(store: Store): Promise<number | null> {
  if (store.stats === undefined) return null;
  const s = await store.stats();
  return s.pending + s.completed + s.failed;
}

const FILTER_FLAGS: Array<[keyof RecordQuery, string]> = [
  ['name', '--name'], ['status', '--status'], ['scope', '--scope'], ['sinceMs', '--since'], ['keyPrefix', '--key'],
];

/**
 * What the filters and the project leave out, as notes for stderr: a listing that shows
 * nothing (or less) must say so when the store holds records a call would see, or
 * records of other projects, and name the flag that shows them.
 */
async function hiddenNotes(store: Store, where: string, query: RecordQuery, matched: number, project: ProjectScope | undefined): Promise<string[]> {
  const notes: string[] = [];
  const flags = FILTER_FLAGS.filter(([k]) => query[k] !== undefined).map(([, f]) => f);
  if (flags.length > 0) {
    const total = await visibleCount(store);
    const hidden = total === null ? 0 : total - matched;
    if (hidden > 0) {
      notes.push(`(${hidden} more record${hidden === 1 ? '' : 's'} in ${where}${project ? ` for project ${JSON.stringify(project.name)}` : ''} ` +
        `do not match ${flags.join(' ')}; leave ${flags.length === 1 ? 'it' : 'them'} out to see them)`);
    }
  }
  if (project !== undefined) {
    const others = await project.otherProjects();
    if (others > 0) {
      notes.push(`(${others} record${others === 1 ? '' : 's'} of other projects in ${project.path} ${others === 1 ? 'is' : 'are'} not shown: ` +
        `this is project ${JSON.stringify(project.name)}'s view; --db ${project.path} shows every project's, --project NAME one project's)`);
    }
  }
  return notes;
}

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
    const r = await recordByKey(store, where, keyPrefix);
    out(mode === 'text' ? detail(r) : mode === 'json' ? JSON.stringify(r, null, 2) : JSON.stringify(r));
    return;
  }
  const { records, matched } = await queryRecords(store, query);
  if (mode === 'json') return out(JSON.stringify(records, null, 2));
  if (mode === 'jsonl') {
    if (records.length > 0) out(records.map((r) => JSON.stringify(r)).join('\n'));
    return;
  }
  if (records.length === 0) {
    const filtered = Object.values(query).some((v) => v !== undefined);
    const of = o.project ? ` for project ${JSON.stringify(o.project.name)}` : '';
    out(filtered ? `No records match in ${where}${of}.` : `No records in ${where}${of}.`);
  } else {
    out(table(records));
    if (matched > records.length) o.err(`(${records.length} of ${matched} matching records shown; raise --limit to see more)`);
  }
  for (const note of await hiddenNotes(store, where, query, matched, o.project)) o.err(note);
}
