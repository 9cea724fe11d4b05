/**
 * The proxy's two stdio transports: the SDK's own, reading through `MessageLines` and
 * writing through `withNumbers`, so that
 * - one message's size limit is the proxy's, the same on both sides, and a message over
 *   it costs that message only, never the session: from the server, a response over the
 *   limit becomes an error response to its request (`MESSAGE_TOO_LARGE`), so the call
 *   that asked learns that its answer was lost; from the client, a request over the limit
 *   is answered with an error at once;
 * - every number passes exactly, both ways (see lib/integrations/mcp-exact-numbers.ts).
 */

import { StdioClientTransport, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

import { MessageLines, parseMessage, type Oversized } from './lines.js';
import { PLACEHOLDER, looksLikePlaceholder, mayHoldNul, withNumbers, withPlaceholders } from '../library.js';

/** What marks the error response that stands in for an answer over the limit. */
export const TOO_LARGE = 'MESSAGE_TOO_LARGE';

/** The SDK's stdio transports read through `_readBuffer` (append, readMessage, clear). */
function readThrough(transport: object, lines: MessageLines): void {
  const t = transport as { _readBuffer?: unknown };
  if (t._readBuffer === undefined) {
    throw new Error('this version of @modelcontextprotocol/sdk reads stdio differently; idempotent-tools mcp needs 1.x with _readBuffer');
  }
  t._readBuffer = lines;
}

/** Writes a message as the SDK does (one line, waiting for drain), its numbers exact. */
function writeExact(stream: () => NodeJS.WritableStream | undefined, message: JSONRPCMessage): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = stream();
    if (out === undefined) return reject(new Error('Not connected'));
    if (out.write(withNumbers(JSON.stringify(message)) + '\n')) resolve();
    else out.once('drain', resolve);
  });
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/**
 * Reads a line with its numbers exact. A string from outside that looks like a
 * placeholder would leave as a number, so its message is not passed on: a request is
 * answered with an error (`answer`), a response is replaced by an error response to the
 * request it answers, a notification is dropped.
 */
function exactReader(side: 'client' | 'server', log: (line: string) => void, answer: (id: string | number, message: string) => void) {
  return (line: string): JSONRPCMessage | undefined => {
    if (mayHoldNul(line)) {
      const original = parseMessage(line);
      if (looksLikePlaceholder(original)) {
        const why = `a string that begins with ${JSON.stringify(PLACEHOLDER)}, which the proxy keeps for the numbers it carries exactly`;
        log(`refused a message from the ${side} with ${why}`);
        const message = `idempotent-tools mcp: the ${side}'s message carries ${why}; it was not passed on`;
        if (!('id' in original) || original.id === undefined) return undefined;
        if ('method' in original) {
          answer(original.id, message);
          return undefined;
        }
        return { jsonrpc: '2.0', id: original.id, error: { code: ErrorCode.InternalError, message } };
      }
    }
    return parseMessage(withPlaceholders(line));
  };
}

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
    new MessageLines(
      limit,
      (o: Oversized): JSONRPCMessage | undefined => {
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
      },
      exactReader('server', log, (id, message) =>
        void transport.send({ jsonrpc: '2.0', id, error: { code: ErrorCode.InvalidParams, message } }).catch(() => {}),
      ),
    ),
  );
  const child = transport as unknown as { _process?: { stdin?: NodeJS.WritableStream } };
  transport.send = (message) => writeExact(() => child._process?.stdin, message);
  return transport;
}

/** The client-facing transport, on the proxy's own stdin and stdout. */
export function downstreamStdio(limit: number, log: (line: string) => void): StdioServerTransport {
  const transport = new StdioServerTransport(process.stdin, process.stdout, { maxBufferSize: limit });
  const answer = (id: string | number, message: string, code: number) =>
    void transport.send({ jsonrpc: '2.0', id, error: { code, message } }).catch(() => {});
  readThrough(
    transport,
    new MessageLines(
      limit,
      (o: Oversized) => {
        const what = `a message of ${mb(o.bytes)} from the client, over the proxy's limit of ${mb(limit)} per message (--max-message)`;
        log(`dropped ${what}`);
        if (o.kind === 'request' && o.id !== undefined) answer(o.id, `idempotent-tools mcp: ${what}; nothing was run`, ErrorCode.InvalidRequest);
        return undefined;
      },
      exactReader('client', log, (id, message) => answer(id, message, ErrorCode.InvalidParams)),
    ),
  );
  transport.send = (message) => writeExact(() => process.stdout, message);
  return transport;
}

/** For `--url`: the HTTP transport's requests with their numbers exact (its responses are
 * read by the SDK, with `JSON.parse`: a number there a double cannot keep is changed). */
export const exactFetch: FetchLike = (url, init) =>
  fetch(url, typeof init?.body === 'string' ? { ...init, body: withNumbers(init.body) } : init);
