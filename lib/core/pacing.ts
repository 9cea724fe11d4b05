/**
 * Keeps a burst of store replies from stalling the event loop.
 *
 * The SQLite writer commits up to hundreds of calls at once and their replies arrive
 * together; each reply resumes a call (encode the result, start the next write, the
 * caller's own code), and without pacing all of them would run in one turn of the loop,
 * delaying every timer and socket of the agent around them. So a call that resumes
 * after `BURST` others in the same turn waits for a later turn, and the waiting calls
 * are let through `BURST` per turn. A call that resumes alone never waits.
 */

const BURST = 8;

let resumedThisTurn = 0;
let turnEndScheduled = false;
const waiting: Array<() => void> = [];

/** Runs in the check phase of the turn: starts the next turn's budget, lets waiters go. */
function endOfTurn(): void {
  resumedThisTurn = 0;
  while (resumedThisTurn < BURST && waiting.length > 0) {
    resumedThisTurn++;
    waiting.shift()!();
  }
  // An immediate queued from inside an immediate runs in the next turn of the loop.
  if (waiting.length > 0) {
    setImmediate(endOfTurn);
  } else {
    // The burst is over: the next call that resumes starts a fresh budget.
    resumedThisTurn = 0;
    turnEndScheduled = false;
  }
}

/** Undefined when the call may go on now; else a promise that resolves on a later turn. */
export function pace(): Promise<void> | undefined {
  if (!turnEndScheduled) {
    turnEndScheduled = true;
    setImmediate(endOfTurn);
  }
  if (waiting.length === 0 && resumedThisTurn < BURST) {
    resumedThisTurn++;
    return undefined;
  }
  return new Promise<void>((resolve) => waiting.push(resolve));
}
