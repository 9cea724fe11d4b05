/**
 * One name, one function, per place where records live: the name is part of every key,
 * so two different functions wrapped under one name on one table, file namespace or
 * Redis prefix would share every record.
 */

import type { Store } from './store.js';

/**
 * @internal Where a built-in store's records physically live (`sqlite:<file>#<namespace>`,
 * `redis:<url>#<prefix>`, `postgres:<host:port/db>#<table>`), so that two store objects
 * on one place (two `idempotentTx` wrappers of one pool and table, a `PostgresStore` on
 * that table, two `SqliteStore`s of one file) share one set of names. A store without it
 * (a user's own) is its own place.
 */
export const RECORDS_PLACE = Symbol.for('idempotent-tools.recordsPlace');

/**
 * @internal An option of `idempotent()` for wrappers built on it (`idempotentTx`): the
 * user's own function, which the one-name-one-function rule compares, instead of the
 * wrapper's adapter (the same source text for every user function).
 */
export const WRAPS = Symbol.for('idempotent-tools.wraps');

/** Stands for "the default store" in the name registry: it is opened lazily, on the first call. */
const DEFAULT_STORE = {};
type Names = Map<string, { fn: WeakRef<object>; source: string }>;
/** Per store object without a place of its own: the function each name is taken by in this process. */
const namesByStore = new WeakMap<object, Names>();
/** Per place of records (see RECORDS_PLACE). */
const namesByPlace = new Map<string, Names>();

function namesOf(store: Store | undefined): Names {
  const place = (store as { [RECORDS_PLACE]?: unknown } | undefined)?.[RECORDS_PLACE];
  if (typeof place === 'string') {
    let names = namesByPlace.get(place);
    if (names === undefined) namesByPlace.set(place, (names = new Map()));
    return names;
  }
  const scope = store ?? DEFAULT_STORE;
  let names = namesByStore.get(scope);
  if (names === undefined) namesByStore.set(scope, (names = new Map()));
  return names;
}

/**
 * Two different functions under one name on one place share every record: the second
 * would return the first's result and never run. Refused at wrap time. The same function
 * wrapped again (the same object, or the same source text, as a tool rebuilt per
 * request is) stays allowed; so, necessarily, do closures of one factory, which share
 * their source.
 */
export function claimName(fn: Function, name: string, store: Store | undefined): void {
  const names = namesOf(store);
  const source = Function.prototype.toString.call(fn);
  const taken = names.get(name);
  if (taken === undefined || taken.fn.deref() === undefined) {
    names.set(name, { fn: new WeakRef(fn), source });
    return;
  }
  if (taken.fn.deref() === fn || taken.source === source) return;
  throw new TypeError(
    `idempotent(): the name "${name}" is already used on this store by another function; pass the "name" option ` +
      `(idempotent(fn, { name: 'sms.${name}' })) to tell them apart. Two functions under one name share every ` +
      'record: one would return the other\'s result and never run',
  );
}
