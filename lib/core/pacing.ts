/**
 * Keeps a burst of store replies from stalling the event loop.
 *
 * The SQLite writer commits up to hundreds of calls at once and their replies arrive
 * together; each reply resumes a call (encode the result, start the next write, the
 * caller's own code), and without pacing all of them would run in one turn of the loop,
 * delaying every timer and socket of the agent around them. So a call that resumes
 * after the turn's budget (`TURN_BUDGET_MS`) is spent waits for a later turn, and the
 * waiting calls are let through a budget per turn. A call that resumes alone never waits.
 */

/**
 * How long the calls resumed in one turn may run before the rest wait for a later turn
 * (ms): a budget of time, not a count, because a resumed call's cost varies (a Redis
 * call's continuation is a few µs, a SQLite one with its next write more). Measured
 * (bench, 64 new Redis calls in flight): a budget of 8 calls a turn cost 30% more CPU
 * per call than letting them run (each turn is another poll, another pipeline); the
 * event loop's p99 goal is 1 ms, so half of it.
 */
const TURN_BUDGET_MS = 0.5;

let turnStartedAt = 0;
/** An end of turn is scheduled, or waiters are being let through. */
let turnEndScheduled = false;
const waiting: Array<() => void> = [];

/** Runs in the check phase of the turn: starts the next turn's budget, lets waiters go. */
function endOfTurn(): void {
  turnStartedAt = performance.now();
  letNextGo(true);
}

/**
 * Lets the next waiter go, then, once its continuation has run up to its next await (a
 * microtask queued after it), the next, while the turn's budget lasts; at least one a turn,
 * so a burst always drains. (Releasing them all in a loop would measure nothing: their
 * continuations run only after the loop.)
 */
function letNextGo(first = false): void {
  if (waiting.length === 0) {
    // The burst is over: the next call that resumes starts a fresh budget.
    turnEndScheduled = false;
    return;
  }
  if (!first && performance.now() - turnStartedAt >= TURN_BUDGET_MS) {
    // An immediate queued from inside an immediate runs in the next turn of the loop.
    setImmediate(endOfTurn);
    return;
  }
  waiting.shift()!();
  queueMicrotask(letNextGo);
}

/** Undefined when the call may go on now; else a promise that resolves on a later turn. */
export function pace(): Promise<void> | undefined {
  if (!turnEndScheduled) {
    turnEndScheduled = true;
    turnStartedAt = performance.now();
    setImmediate(endOfTurn);
    return undefined;
  }
  if (waiting.length === 0 && performance.now() - turnStartedAt < TURN_BUDGET_MS) return undefined;
  return new Promise<void>((resolve) => waiting.push(resolve));
}
