/**
 * A real store whose requests are counted: every method call made on it, by name. The store
 * does its own work; the count is what a test asserts about (a wait that went on polling
 * would show as more `acquire`s), never how long something took.
 */

type Store = import('../dist/core/store.js').Store;

export interface Counted<S extends Store> {
  /** The store to hand to the code under test (the same object for every call: in-process wake-ups are per store object). */
  store: S;
  /** How many times `method` was called so far (with a first argument that `which` picks: `{ key, name, ... }` for acquire). */
  count(method: string, which?: (request: any) => boolean): number;
}

export function countingRequests<S extends Store>(store: S): Counted<S> {
  const calls: Array<[string, unknown]> = [];
  const methods = new Map<PropertyKey, unknown>();
  const counted = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      let method = methods.get(property);
      if (method === undefined) {
        method = function (...args: unknown[]) {
          if (typeof property === 'string') calls.push([property, args[0]]);
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
        methods.set(property, method);
      }
      return method;
    },
  });
  return { store: counted, count: (method, which) => calls.filter(([m, first]) => m === method && (which === undefined || which(first))).length };
}
