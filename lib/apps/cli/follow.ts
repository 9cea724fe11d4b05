/** `inspect --follow`: prints calls as they settle, until interrupted. */

import { forTerminal } from '../terminal-text.js';
import type { ChangeSignal } from './changes.js';
import { followLine } from './format.js';
import { isDecisionStatus, keyIdSecrets, keyIdWith, looksDerived, matches, recentRecords, type RecordQuery, type IdempotencyRecord, type Store } from '../library.js';

/** What identifies one state of a record: a new claim, a settle, a release all change it. */
function state(r: IdempotencyRecord): string {
  return `${r.status}|${r.updatedAt}|${r.attempts}`;
}

export interface FollowOptions {
  query: RecordQuery;
  json: boolean;
  changes: ChangeSignal;
  stop: AbortSignal;
  out: (text: string) => void;
  /** Told once the current records are known: from then on, every settle is printed. */
  ready: (text: string) => void;
}

export async function follow(store: Store, where: string, o: FollowOptions): Promise<void> {
  const { query } = o;
  // Settles by default; `--status pending` follows new claims and take-overs instead.
  // A decision status (`--status rejected`) follows the decisions as they are recorded (matches checks them).
  const decisions = isDecisionStatus(query.status);
  const shows = (r: IdempotencyRecord) => (decisions ? r.status === 'completed' : query.status === undefined ? r.status !== 'pending' : r.status === query.status);
  // Without results (a settle's line shows none); --json fetches the full record of each
  // one it prints. Status and name go into the store's own query where it has one.
  const list = async () =>
    (await recentRecords(store, decisions ? {} : { status: query.status as IdempotencyRecord['status'] | undefined, name: query.name })).records;
  // A line names a derived key by its keyed id (as events and traces do: a follow is a
  // log, and a derived key is a hash of the arguments that a reader could reverse), under
  // the secret of the record's project; where no secret exists yet, the key is left out.
  const shownKey = async (r: IdempotencyRecord) => {
    if (!looksDerived(r.key)) return r.key;
    const secret = (await keyIdSecrets(store).catch(() => new Map<string, string>())).get(r.namespace ?? '');
    return secret === undefined ? '' : keyIdWith(secret, r.key);
  };
  const seen = new Map<string, string>();
  for (const r of await list()) seen.set(r.key, state(r));
  o.ready(`Following ${forTerminal(where)} (changes noticed by ${o.changes.how}); Ctrl-C to stop.`);
  while (!o.stop.aborted) {
    await o.changes.next(o.stop);
    if (o.stop.aborted) break;
    const now = Date.now();
    const records = await list();
    const changed = records.filter((r) => seen.get(r.key) !== state(r)).sort((a, b) => a.updatedAt - b.updatedAt);
    seen.clear();
    for (const r of records) seen.set(r.key, state(r));
    // `--since` and `--limit` shape the first look, not a live stream.
    const q = { ...query, sinceMs: undefined };
    for (const r of changed) {
      if (!shows(r) || !matches(r, q, now)) continue;
      if (!o.json) {
        o.out(followLine(r, await shownKey(r)));
        continue;
      }
      const full = await store.get(r.key); // null: deleted (or expired) since the listing
      if (full !== null && state(full) === state(r)) o.out(JSON.stringify(full));
      else if (full === null) o.out(JSON.stringify(r));
    }
  }
}
