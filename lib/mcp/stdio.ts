/**
 * The proxy's two stdio transports, the SDK's own, reading through `MessageLines` so that
 * one message's size limit is the proxy's, the same on both sides, and a message over it
 * costs that message only, never the session:
 * - from the server, a response over the limit becomes an error response to its request
 *   (`MESSAGE_TOO_LARGE`), so the call that asked for it learns that its answer was lost;
 * - from the client, a request over the limit is answered with an error at once.
 */

import { StdioClientTransport, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { ErrorCode, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

import { inexactNumbers } from './exact-numbers.js';
import { MessageLines, type Oversized } from './lines.js';

/** What marks the error response that stands in for an answer over the limit. */
export const TOO_LARGE = 'MESSAGE_TOO_LARGE';

/** The SDK's transports read through `_readBuffer` (append, readMessage, clear). */
function readThrough(transport: object, lines: MessageLines): void {
  const t = transport as { _readBuffer?: unknown };
  if (t._readBuffer === undefined) {
    throw new Error('this version of @modelcontextprotocol/sdk reads stdio differently; idempotent-tools mcp needs 1.x with _readBuffer');
  }
  t._readBuffer = lines;
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** The upstream server's transport (spawns it). */
export function upstreamStdio(
  params: StdioServerParameters,
  limit: number,
  log: (line: string) => void,
  /** The error code of the response that stands in for one over the limit. */
  code: number,
): StdioClientTransport {
  const transport = new StdioClientTransport({ ...params, maxBufferSize: limit });
  readThrough(
    transport,
    new MessageLines(limit, (o: Oversized): JSONRPCMessage | undefined => {
      const over = `over the proxy's limit of ${mb(limit)} per message (--max-message)`;
      if (o.kind !== 'response' || o.id === undefined) {
        log(`dropped a message of ${mb(o.bytes)} from the server, ${over}: not an answer the proxy could match to its request`);
        return undefined;
      }
      log(`dropped the server's answer to request ${o.id} (${mb(o.bytes)}), ${over}`);
      return {
        jsonrpc: '2.0',
        id: o.id,
        error: {
          code,
          message: `the server's answer (${mb(o.bytes)}) was ${over}, and was dropped (a larger --max-message lets it through)`,
          data: { 'idempotent-tools': TOO_LARGE, bytes: o.bytes, limit },
        },
      };
    }),
  );
  return transport;
}

/**
 * A request with a number JSON.parse would change is answered with an error here, before
 * the proxy sees it: forwarded, the server would get another number; guarded, two
 * distinct ids would share a key.
 */
function exactNumbersOnly(transport: StdioServerTransport, log: (line: string) => void) {
  return (line: string, message: JSONRPCMessage): boolean => {
    const inexact = inexactNumbers(line);
    if (inexact.length === 0 || !('method' in message) || !('id' in message)) return true;
    const n = inexact[0];
    const message_ =
      `idempotent-tools mcp: ${message.method} carries the number ${n}, which cannot pass through exactly ` +
      `(JSON.parse makes it ${JSON.stringify(Number(n))}): the server would get another number, and another ` +
      `call could share this one's key. Nothing was run. Send it as a string ("${n}"), or as a number within ±2^53`;
    log(`refused   ${message.method}: the number ${n} cannot pass through exactly`);
    void transport.send({ jsonrpc: '2.0', id: message.id, error: { code: ErrorCode.InvalidParams, message: message_ } }).catch(() => {});
    return false;
  };
}

/** The client-facing transport, on the proxy's own stdin and stdout. */
export function downstreamStdio(limit: number, log: (line: string) => void): StdioServerTransport {
  const transport = new StdioServerTransport(process.stdin, process.stdout, { maxBufferSize: limit });
  readThrough(
    transport,
    new MessageLines(limit, (o: Oversized) => {
      const what = `a message of ${mb(o.bytes)} from the client, over the proxy's limit of ${mb(limit)} per message (--max-message)`;
      log(`dropped ${what}`);
      if (o.kind === 'request' && o.id !== undefined) {
        void transport
          .send({ jsonrpc: '2.0', id: o.id, error: { code: ErrorCode.InvalidRequest, message: `idempotent-tools mcp: ${what}; nothing was run` } })
          .catch(() => {});
      }
      return undefined;
    }, exactNumbersOnly(transport, log)),
  );
  return transport;
}
