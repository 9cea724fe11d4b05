/**
 * One name, one function, per place where records live: the name is part of every key,
 * so two different functions wrapped under one name on one table, file namespace or
 * Redis prefix would share every record.
 */

import type { Store } from './store.js';

/**
 * @internal Where a built-in store's records physically live (`sqlite:<file>#<namespace>`,
 * `redis:<scheme>://<user>@<host>:<port>/<db>#<prefix>`, `postgres:<host:port/db>#<table>`),
 * so that two store objects on one place (two `idempotentTx` wrappers of one pool and
 * table, a `PostgresStore` on that table, two `SqliteStore`s of one file, two
 * `RedisStore`s whose URLs are spelled differently) share one set of names. A store
 * without it (a user's own) is its own place.
 */
export const RECORDS_PLACE = Symbol.for('idempotent-tools.recordsPlace');

/**
 * @internal An option of `idempotent()` for wrappers built on it (`idempotentTx`): the
 * user's own function, which the one-name-one-function rule compares, instead of the
 * wrapper's adapter (the same source text for every user function).
 */
export const WRAPS = Symbol.for('idempotent-tools.wraps');

/** A place of records: a built-in store's place string, or the store object itself. */
export type Place = string | object;

/** Where `store`'s records live: its RECORDS_PLACE, else the object itself. */
export function placeOf(store: Store): Place {
  const place = (store as { [RECORDS_PLACE]?: unknown })[RECORDS_PLACE];
  return typeof place === 'string' ? place : store;
}

type Names = Map<string, { fn: WeakRef<object>; source: string }>;
/** Per store object without a place of its own: the function each name is taken by in this process. */
const namesByStore = new WeakMap<object, Names>();
/** Per place of records (see RECORDS_PLACE). */
const namesByPlace = new Map<string, Names>();

function namesOf(place: Place): Names {
  const byPlace = typeof place === 'string' ? namesByPlace : namesByStore;
  let names = (byPlace as Map<Place, Names>).get(place);
  if (names === undefined) (byPlace as Map<Place, Names>).set(place, (names = new Map()));
  return names;
}

function sourceOf(fn: Function): string {
  return Function.prototype.toString.call(fn);
}

/** Takes `name` for `fn` on `place`; false when another function holds it there. */
function take(fn: Function, source: string, name: string, place: Place): boolean {
  const names = namesOf(place);
  const taken = names.get(name);
  if (taken === undefined || taken.fn.deref() === undefined) {
    names.set(name, { fn: new WeakRef(fn), source });
    return true;
  }
  return taken.fn.deref() === fn || taken.source === source;
}

/**
 * Two different functions under one name on one place share every record: the second
 * would return the first's result and never run. Refused at wrap time (and, for a wrapper
 * that follows the default store, when the default it resolves to changes). The same
 * function wrapped again (the same object, or the same source text, as a tool rebuilt per
 * request is) stays allowed; so, necessarily, do closures of one factory, which share
 * their source.
 */
export function claimName(fn: Function, name: string, place: Place): void {
  if (take(fn, sourceOf(fn), name, place)) return;
  throw new TypeError(
    `idempotent(): the name "${name}" is already used on this store by another function; pass the "name" option ` +
      `(idempotent(fn, { name: 'sms.${name}' })) to tell them apart. Two functions under one name share every ` +
      'record: one would return the other\'s result and never run',
  );
}

/**
 * The wrappers made without `store`, by name and source text (a tool rebuilt per request
 * counts once): when `setDefaultStore` moves them, their names are taken on the new place
 * at once, so a function wrapped there later under one of them is refused at its wrap.
 */
const followers = new Map<string, Map<string, WeakRef<Function>>>();

/** @internal Remembers a wrapper made without `store`. */
export function followDefault(fn: Function, name: string): void {
  let bySource = followers.get(name);
  if (bySource === undefined) followers.set(name, (bySource = new Map()));
  bySource.set(sourceOf(fn), new WeakRef(fn));
}

/**
 * @internal The default store moved to `place`: each follower takes its name there where
 * it is free. Where another function holds it, nothing is thrown here: that follower's
 * next call meets the conflict (claimName) before it runs.
 */
export function claimFollowersOn(place: Place): void {
  for (const [name, bySource] of followers) {
    for (const [source, ref] of bySource) {
      const fn = ref.deref();
      if (fn === undefined) bySource.delete(source);
      else take(fn, source, name, place);
    }
    if (bySource.size === 0) followers.delete(name);
  }
}
