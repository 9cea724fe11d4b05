import { type Store } from '../library.js';
/**
 * The window hides an expired record; this deletes it. Without it every guarded result
 * (API responses, tokens, personal data) would stay in the store for good. Uses the
 * store's optional `prune()`, which deletes only settled records whose time is up, never
 * a pending one. A failed prune is a line in the log, never the end of the proxy.
 */


/** How often a long-lived proxy prunes, after once at start. */
export const PRUNE_EVERY_MS = 10 * 60_000;

/** Prunes now and every `everyMs`; returns the function that stops it. */
export function keepPruned(store: Store, log: (line: string) => void, everyMs = PRUNE_EVERY_MS): () => void {
  if (typeof store.prune !== 'function') {
    log('this store cannot prune: expired records stay until cleared (idempotent-tools clear)');
    return () => {};
  }
  let stopped = false;
  let running = false;
  /** The first prune always says what it did (`pruned 0 ...` included); later ones only when they deleted. */
  let first = true;
  const prune = async () => {
    if (stopped || running) return;
    running = true;
    try {
      const n = await store.prune!();
      if (n > 0 || first) log(`pruned ${n} expired record${n === 1 ? '' : 's'} from the store`);
    } catch (err) {
      if (!stopped) log(`could not prune expired records: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      running = false;
      first = false;
    }
  };
  void prune();
  const timer = setInterval(() => void prune(), everyMs);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
