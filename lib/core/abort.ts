/**
 * Listening to an abort signal without piling listeners on it. Many waits may listen to one
 * signal at once (a framework's signal shared by the tool calls of a step; the proxy's own
 * "the client left"): each listener of its own would pass Node's limit of ten per signal
 * and print a MaxListenersExceededWarning in the user's log. So each signal gets one
 * listener here, which calls every callback registered on it, and goes when the last one does.
 */

import type { WaitSignal } from './options.js';

interface Listeners {
  callbacks: Set<() => void>;
  fire: () => void;
}

const bySignal = new WeakMap<WaitSignal, Listeners>();

/** Calls `callback` once when `signal` (not aborted yet: callers look first) aborts; returns the function that stops listening. */
export function onAbort(signal: WaitSignal, callback: () => void): () => void {
  let listeners = bySignal.get(signal);
  if (listeners === undefined) {
    const callbacks = new Set<() => void>();
    const fire = () => {
      bySignal.delete(signal);
      for (const cb of [...callbacks]) cb();
      callbacks.clear();
    };
    listeners = { callbacks, fire };
    bySignal.set(signal, listeners);
    signal.addEventListener('abort', fire, { once: true });
  }
  const own = listeners;
  own.callbacks.add(callback);
  return () => {
    if (!own.callbacks.delete(callback) || own.callbacks.size > 0) return;
    signal.removeEventListener('abort', own.fire);
    if (bySignal.get(signal) === own) bySignal.delete(signal);
  };
}
