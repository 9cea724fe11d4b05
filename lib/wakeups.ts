/**
 * In-process wake-ups for `onDuplicate: 'block'`. A waiter in the same process as the
 * key's owner is woken the moment the owner settles; a waiter whose owner is another
 * process finds out on its next poll.
 */

const waiting = new WeakMap<object, Map<string, Set<() => void>>>();

/** Resolves when `notify(store, key)` is called or after `ms`, whichever comes first. */
export function waitForChange(store: object, key: string, ms: number): Promise<void> {
  let byKey = waiting.get(store);
  if (byKey === undefined) waiting.set(store, (byKey = new Map()));
  let wakers = byKey.get(key);
  if (wakers === undefined) byKey.set(key, (wakers = new Set()));
  const set = wakers;
  return new Promise<void>((resolve) => {
    const wake = () => {
      clearTimeout(timer);
      set.delete(wake);
      if (set.size === 0 && byKey!.get(key) === set) byKey!.delete(key);
      resolve();
    };
    const timer = setTimeout(wake, ms);
    set.add(wake);
  });
}

export function notify(store: object, key: string): void {
  const wakers = waiting.get(store)?.get(key);
  if (wakers === undefined) return;
  for (const wake of [...wakers]) wake();
}
