/**
 * What a completion stores of a value that `fn` (or a step) returned: its JSON text, or,
 * when it cannot be stored (not JSON data, or over `maxResultBytes`), the error the
 * completed record keeps instead. The side effect has happened either way, so the record
 * is completed and never runs again; the caller and every replay get a `TypeError`.
 * One rule for calls and steps.
 */

import { Unencodable, resultJson } from './canonical.js';
import { resultTooLarge } from './limits.js';
import { clearCommand } from './shell.js';
import type { RecordError } from './store.js';

/** How the messages name what ran: a call (`"charge"`, the function) or a step. */
export interface Ran {
  /** `"charge"` or `step charge.step("email")`. */
  who: string;
  /** 'call' or 'step'. */
  kind: 'call' | 'step';
  /** The call's key (a step goes with its call: cleared with it), and whether it was derived from the arguments. */
  key: string;
  derived?: boolean;
}

export function storableResult(value: unknown, maxResultBytes: number, ran: Ran): { resultJson?: string; unstorable?: RecordError } {
  if (value === undefined) return {};
  const from = ran.kind === 'call' ? 'the function' : 'the step';
  // A call's record can be cleared to run it again; a step goes with its call.
  // A derived key stays out of messages (it can be reversed by guessing the arguments).
  const clear = ran.derived ? 'npx idempotent-tools clear --key <error.key>' : clearCommand(ran.key);
  const after = ran.kind === 'call' ? ` (to run it again, clear its record: ${clear})` : '';
  const unstorable = (why: string, fix: string): { unstorable: RecordError } => ({
    unstorable: {
      name: 'TypeError',
      message:
        `idempotent-tools: ${ran.who} ran, but its result cannot be stored: ${why}. ` +
        `The ${ran.kind} is recorded as completed and will not run again; ${fix}${after}`,
    },
  });
  let json: string;
  try {
    json = resultJson(value);
  } catch (err) {
    if (!(err instanceof Unencodable)) throw err;
    return unstorable(`${err.pathFrom('result')} is ${err.what}`, err.fix === undefined ? `return JSON data from ${from}` : `${err.fix.replace(/^return /, `return from ${from} `)}`);
  }
  const tooLarge = resultTooLarge(json, maxResultBytes);
  if (tooLarge !== undefined) {
    return unstorable(tooLarge, `return less from ${from}, or raise ${ran.kind === 'call' ? 'maxResultBytes' : "the call's maxResultBytes"}`);
  }
  return { resultJson: json };
}
