/**
 * When a duplicate of an MCP call in flight stops waiting for it: its own request is
 * cancelled, or its client leaves. Read one way by `idempotent-tools/mcp-server` and by the
 * proxy (`apps/mcp/`, through `apps/library.ts`); the core ends the wait (its WAIT_SIGNAL
 * option) the moment the signal built here fires.
 *
 * What each MCP runtime tells a handler (MCP SDK 1.x, fastmcp 4.x):
 * - a client's `notifications/cancelled`: the SDK aborts that request's `extra.signal`;
 * - a transport that closes (in-process, Streamable HTTP when the server closes the
 *   request's transport or the session ends): the SDK aborts every request's `extra.signal`;
 * - a stdio client that closes the server's stdin: the SDK's `StdioServerTransport` does
 *   not close, and aborts nothing, so the stream's end is watched here (`inputEnded`);
 * - fastmcp's `context.signal` covers all three (it closes its transport when stdin ends).
 */

import { onAbort } from '../core/abort.js';

/** A transport's input stream, as the SDK's `StdioServerTransport` keeps it (`_stdin`). */
interface InputStream {
  readableEnded?: boolean;
  destroyed?: boolean;
  once(event: 'end' | 'close', listener: () => void): unknown;
}

const ended = new WeakMap<object, AbortSignal>();

/**
 * A signal that fires when the client of a stdio transport closes its end (the transport's
 * input stream ends or closes); undefined for a transport that reads no stream of its own
 * (its close aborts `extra.signal` instead). One per transport, for as long as it lives.
 */
export function inputEnded(transport: unknown): AbortSignal | undefined {
  if (transport === null || typeof transport !== 'object') return undefined;
  const known = ended.get(transport);
  if (known !== undefined) return known;
  const input = (transport as { _stdin?: unknown })._stdin as InputStream | undefined;
  if (input === null || typeof input !== 'object' || typeof input.once !== 'function') return undefined;
  const controller = new AbortController();
  const gone = () => controller.abort(new Error('the client closed its end of stdio'));
  if (input.readableEnded === true || input.destroyed === true) gone();
  else {
    input.once('end', gone);
    input.once('close', gone);
  }
  ended.set(transport, controller.signal);
  return controller.signal;
}

/** One signal for several: fires with the first of them. `release()` drops its listeners (call it when the call is done). */
export function eitherSignal(signals: Array<AbortSignal | undefined>): { signal: AbortSignal | undefined; release: () => void } {
  const given = signals.filter((s): s is AbortSignal => s !== undefined);
  if (given.length <= 1) return { signal: given[0], release: () => {} };
  const controller = new AbortController();
  const fired = given.find((s) => s.aborted);
  if (fired !== undefined) {
    controller.abort(fired.reason);
    return { signal: controller.signal, release: () => {} };
  }
  // Not AbortSignal.any: its sources are long-lived (a transport's), and each call's would
  // stay listed on them; these listeners go when the call is done (and, however many calls
  // listen, each source holds one listener: core/abort.ts).
  const listeners = given.map((s) => onAbort(s, () => controller.abort(s.reason)));
  return { signal: controller.signal, release: () => listeners.forEach((remove) => remove()) };
}
