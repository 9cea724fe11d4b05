/**
 * The default store: the one every wrapper made without `store` uses, and `defaultStore()`
 * returns. Owned here, in core/, so that the call protocol never reaches out to stores/:
 * `setDefaultStore(store)` in code, else the store the registered source names. The entry
 * points register the environment's choice (stores/default-store.ts does, when it loads),
 * so core/ never knows which stores exist.
 *
 * One place, one registry of names (names.ts): the place of "the default store" is the
 * place of the store it resolves to, so a wrapper made without `store`, one given
 * `defaultStore()` and one given the store passed to `setDefaultStore` are checked
 * against one set of names.
 */

import { type Place, claimFollowersOn, placeOf } from './names.js';
import type { Store } from './store.js';

/** Where the default store comes from when `setDefaultStore` set none. */
export interface DefaultStoreSource {
  /** The store the environment names now (the same object for the same choice, while open). */
  open(): Store;
  /** Where that store's records live (its place), known without opening it. */
  place(): Place;
}

let source: DefaultStoreSource | undefined;
let chosen: Store | undefined;
/** Bumped by every setDefaultStore: wrappers that resolved the default before look again. */
let generation = 0;

/** @internal Registers the environment's choice of store (stores/default-store.ts does, when an entry point loads it). */
export function registerDefaultStoreSource(given: DefaultStoreSource): void {
  source = given;
}

function registered(): DefaultStoreSource {
  if (source === undefined) {
    // Only reachable by importing a module of core/ directly instead of an entry point.
    throw new Error('idempotent-tools: no default store is registered; import the package ("idempotent-tools"), not a module of its core');
  }
  return source;
}

/**
 * The store every wrapper made without `store` uses: the one `setDefaultStore` set, else
 * the one the environment names (read when called; every call with the same environment
 * and project returns the same store). Its class and `path` say which it is.
 */
export function defaultStore(): Store {
  return chosen ?? registered().open();
}

/** @internal Where the default store's records live, without opening it (for the name registry). */
export function defaultStorePlace(): Place {
  return chosen !== undefined ? placeOf(chosen) : registered().place();
}

/** @internal How many times the default was set (see `idempotent.ts`). */
export function defaultStoreGeneration(): number {
  return generation;
}

/**
 * Sets the store of every wrapper made without `store` (calls already running keep the
 * one they started with); `null` goes back to the environment's choice. The store is
 * the caller's: closing it is too.
 */
export function setDefaultStore(store: Store | null): void {
  if (store !== null) {
    const missing = ['get', 'acquire', 'complete', 'fail'].filter(
      (m) => store === undefined || typeof (store as unknown as Record<string, unknown>)[m] !== 'function',
    );
    if (store === undefined || typeof store !== 'object' || missing.length > 0) {
      throw new TypeError(
        `setDefaultStore(store): store must implement the store interface (missing: ${missing.join(', ') || 'an object'}); ` +
          'pass a SqliteStore, RedisStore, PostgresStore or MemoryStore, or null for the environment\'s choice',
      );
    }
  }
  chosen = store ?? undefined;
  generation++;
  // The wrappers made without `store` now write here: their names are taken here too, so
  // that another function wrapped under one of them on this store is refused at its wrap.
  if (source !== undefined || chosen !== undefined) claimFollowersOn(defaultStorePlace());
}
