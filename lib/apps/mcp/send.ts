/**
 * How a guarded call goes to the server, and what the way it ends means for its record:
 * - a client's cancel is kept from the server (`"cancel": "finish"`): the SDK's servers
 *   never answer a cancelled request, so forwarding it would lose the outcome of a call
 *   that may well finish; the call goes on and its result is recorded for the retry;
 * - under `"cancel": "forward"`, a cancel sent on makes the outcome unknown;
 * - an answer lost on the way (over `--max-message`, or the server gone mid-call) makes
 *   the outcome unknown too: the call may have happened, so it is never `failed`.
 */

import { ErrorCode, McpError, forward, relayed, type Forwardable, type Peer } from './forward.js';
import { OutcomeUnknown, type CallToolResult } from './guard.js';
import type { CancelPolicy } from './policy.js';
import { TOO_LARGE } from './stdio.js';

export interface GuardedSend {
  server: Peer;
  request: Forwardable;
  /** The client's cancellation of this request. */
  signal: AbortSignal;
  cancel: CancelPolicy;
  /** `<server>/<tool>`, for messages. */
  label: string;
  leaseMs: number;
  /** Whether the server is gone, or the proxy is closing it. */
  serverGone: () => boolean;
}

export async function sendGuarded(s: GuardedSend): Promise<CallToolResult> {
  const pending = `Its record stays pending until its lease runs out (${s.leaseMs / 1000}s); then a retry runs it again`;
  const forwardCancel = s.cancel === 'forward';
  // Not sent yet: nothing ran, and the record may say so.
  if (forwardCancel && s.signal.aborted) throw new Error('the client cancelled this call before it was sent to the server');
  try {
    return (await forward(s.server, s.request, forwardCancel ? s.signal : undefined)) as CallToolResult;
  } catch (err) {
    if (forwardCancel && s.signal.aborted) {
      throw new OutcomeUnknown(`the client cancelled "${s.label}" and the cancel was forwarded; whether the call took effect is unknown. ${pending}`);
    }
    if (err instanceof McpError && (err.data as Record<string, unknown> | undefined)?.['idempotent-tools'] === TOO_LARGE) {
      throw new OutcomeUnknown(`${relayed(err).message}: whether "${s.label}" took effect is unknown. ${pending}`);
    }
    if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed && s.serverGone()) {
      throw new OutcomeUnknown(`the server went away during "${s.label}": whether it took effect is unknown. ${pending}`);
    }
    throw err;
  }
}
