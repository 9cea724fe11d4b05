/**
 * One name, one function, per store: the name is part of every key, so two different
 * functions wrapped under one name on one store would share every record.
 */

import type { Store } from './store.js';

/** Stands for "the default store" in the name registry: it is opened lazily, on the first call. */
const DEFAULT_STORE = {};
/** Per store (object identity), the function each name is taken by in this process. */
const namesInUse = new WeakMap<object, Map<string, { fn: WeakRef<object>; source: string }>>();

/**
 * Two different functions under one name on one store share every record: the second
 * would return the first's result and never run. Refused at wrap time. The same function
 * wrapped again (the same object, or the same source text, as a tool rebuilt per
 * request is) stays allowed; so, necessarily, do closures of one factory, which share
 * their source.
 */
export function claimName(fn: Function, name: string, store: Store | undefined): void {
  const scope = store ?? DEFAULT_STORE;
  let names = namesInUse.get(scope);
  if (names === undefined) namesInUse.set(scope, (names = new Map()));
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
