/**
 * "Something may have changed in the store": the signal `inspect --follow` and the
 * inspector page wait on before they read records again. Each store's own signal:
 * - SQLite: `PRAGMA data_version` (native `SqliteChangeWatch`), asked every 100 ms: a
 *   look at shared memory, so the records are read only after a commit.
 * - Redis and any other store: a poll, once a second (Redis keyspace notifications are
 *   off by default on servers, and enabling them is a server-wide change).
 */

import { setTimeout as sleep } from 'node:timers/promises';

import { SqliteChangeWatch } from '../library.js';

export interface ChangeSignal {
  /** How changes are noticed, for the user. */
  readonly how: string;
  /** Resolves when the store may have changed, or when `stop` aborts. */
  next(stop: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

const SQLITE_LOOK_MS = 100;
const POLL_MS = 1000;

async function pause(ms: number, stop: AbortSignal): Promise<void> {
  await sleep(ms, undefined, { signal: stop }).catch(() => {});
}

export async function sqliteChanges(path: string): Promise<ChangeSignal> {
  const watch = await SqliteChangeWatch.open(path);
  let last = await watch.version();
  return {
    how: 'SQLite data_version',
    async next(stop) {
      while (!stop.aborted) {
        await pause(SQLITE_LOOK_MS, stop);
        if (stop.aborted) return;
        const now = await watch.version();
        if (now !== last) {
          last = now;
          return;
        }
      }
    },
    close: () => watch.close(),
  };
}

export function pollChanges(): ChangeSignal {
  return {
    how: `a poll every ${POLL_MS / 1000} s`,
    next: (stop) => pause(POLL_MS, stop),
    close: async () => {},
  };
}
