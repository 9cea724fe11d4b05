/**
 * The inspector page's timeline: per tool, counts of executed, replayed, failed and
 * taken-over calls in time buckets. Two sources, and the page says which it has:
 * - the records (any store, any process): a completed record counts as executed at its
 *   last update, a failed one as failed, and one with attempts > 1 as a re-run (a
 *   take-over, a retry after a failure, or onDuplicate 'retry'). A record keeps only its
 *   latest state, so earlier attempts of one key are not separate points;
 * - the `idempotent-tools:call` events, when the page's server runs inside the
 *   application (`serveInspector` from `idempotent-tools/ui`): replays and take-overs as
 *   they happen in that process since the server started. Replays change no record, so
 *   a separate `idempotent-tools ui` process cannot see them.
 */

import diagnostics_channel from 'node:diagnostics_channel';
import { CHANNEL_NAME, type IdempotencyEvent, type IdempotencyRecord } from '../library.js';


export type Kind = 'executed' | 'replayed' | 'failed' | 'takenOver';

export interface ToolTimeline {
  name: string;
  /** One array per kind, one count per bucket. */
  counts: Record<Kind, number[]>;
}

export interface Timeline {
  from: number;
  to: number;
  bucketMs: number;
  tools: ToolTimeline[];
  /** True when replays and take-overs are counted from live events (in-process server). */
  live: boolean;
  liveSince: number | null;
}

interface SeenEvent {
  at: number;
  type: IdempotencyEvent['type'];
  name: string;
  /** The record's keyed id (what events carry). */
  key: string;
}

const KEEP_EVENTS = 20_000;

/** Remembers the last calls' events of this process while the page's server runs. */
export class EventLog {
  readonly since = Date.now();
  #events: SeenEvent[] = [];
  #listener = (message: unknown) => {
    const e = message as IdempotencyEvent;
    if (e.type !== 'replayed' && e.type !== 'taken-over') return;
    this.#events.push({ at: Date.now(), type: e.type, name: e.name, key: e.keyId ?? e.key }); // events name records by keyed id
    if (this.#events.length > KEEP_EVENTS) this.#events.splice(0, this.#events.length - KEEP_EVENTS);
  };

  constructor() {
    diagnostics_channel.subscribe(CHANNEL_NAME, this.#listener);
  }

  events(): readonly SeenEvent[] {
    return this.#events;
  }

  close(): void {
    diagnostics_channel.unsubscribe(CHANNEL_NAME, this.#listener);
  }
}

const BUCKETS = 30;

export function buildTimeline(
  records: IdempotencyRecord[],
  windowMs: number,
  now: number,
  log: EventLog | undefined,
  keep: (name: string, key: string) => boolean,
): Timeline {
  const from = now - windowMs;
  const bucketMs = windowMs / BUCKETS;
  const tools = new Map<string, ToolTimeline>();
  const add = (name: string, kind: Kind, at: number) => {
    if (at < from || at > now) return;
    let t = tools.get(name);
    if (t === undefined) {
      const zeros = () => new Array<number>(BUCKETS).fill(0);
      t = { name, counts: { executed: zeros(), replayed: zeros(), failed: zeros(), takenOver: zeros() } };
      tools.set(name, t);
    }
    t.counts[kind][Math.min(BUCKETS - 1, Math.floor((at - from) / bucketMs))]++;
  };
  for (const r of records) {
    if (r.status === 'completed') add(r.name, 'executed', r.updatedAt);
    if (r.status === 'failed') add(r.name, 'failed', r.updatedAt);
    if (r.attempts > 1 && log === undefined) add(r.name, 'takenOver', r.updatedAt);
  }
  for (const e of log?.events() ?? []) {
    if (keep(e.name, e.key)) add(e.name, e.type === 'replayed' ? 'replayed' : 'takenOver', e.at);
  }
  return {
    from,
    to: now,
    bucketMs,
    tools: [...tools.values()].sort((a, b) => a.name.localeCompare(b.name)),
    live: log !== undefined,
    liveSince: log?.since ?? null,
  };
}
