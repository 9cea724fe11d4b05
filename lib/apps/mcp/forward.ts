/**
 * Generic MCP forwarding on the official SDK: each side of the proxy is the SDK's
 * `Protocol` (JSON-RPC framing, request ids, cancellation, progress, timeouts), with its
 * capability checks off, because the proxy relays what the two real ends negotiated.
 */

import { Protocol, type RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  ErrorCode,
  McpError,
  ResultSchema,
  type Notification,
  type Request,
  type Result,
} from '@modelcontextprotocol/sdk/types.js';

/** One end of the proxy. */
export class Peer extends Protocol<Request, Notification, Result> {
  // The proxy forwards whatever the client and the server agreed on at initialize;
  // checking capabilities here would only second-guess them.
  protected assertCapabilityForMethod(): void {}
  protected assertNotificationCapability(): void {}
  protected assertRequestHandlerCapability(): void {}
  protected assertTaskCapability(): void {}
  protected assertTaskHandlerCapability(): void {}
}

export type Extra = RequestHandlerExtra<Request, Notification>;

/** A request as it travels: method and params (the JSON-RPC id is per hop). */
export interface Forwardable {
  method: string;
  params?: Record<string, unknown>;
}

/** setTimeout's largest delay: the proxy sets no timeout of its own, the client has its own. */
const NO_TIMEOUT = 2_147_483_647;

/**
 * Sends `request` on through `to` and returns its result. The caller's cancellation
 * (`signal`) becomes a `notifications/cancelled` to the other side (request ids are per
 * hop); without a signal, a cancel stays on this side. A progress token travels unchanged
 * (see `McpProxy` for its notifications).
 */
export function forward(to: Peer, request: Forwardable, signal: AbortSignal | undefined): Promise<Result> {
  return to.request({ method: request.method, params: request.params }, ResultSchema, {
    ...(signal === undefined ? {} : { signal }),
    timeout: NO_TIMEOUT,
  });
}

/** An error as it goes back on the wire: the Protocol sends `code`, `message` and `data`. */
export class WireError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** The SDK prefixes an error response's message with "MCP error <code>: " when it
 * receives it; relaying that would stack a prefix at every hop. */
export function relayed(err: McpError): WireError {
  const prefix = `MCP error ${err.code}: `;
  const message = err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message;
  return new WireError(err.code, message, err.data);
}

export { ErrorCode, McpError };
