/**
 * The proxy's reading of newline-delimited JSON-RPC on stdio, in place of the SDK's
 * `ReadBuffer`, with a limit on one message that is the proxy's own and is kept to:
 * - a message over the limit is skipped to its end, so the stream stays in step and the
 *   session goes on (the SDK's buffer throws, and its transports then close: a result over
 *   10 MB killed the server and ended the proxy);
 * - what the skipped message was is handed to `onOversized` (its id, read from its first
 *   and last bytes), so the request it answered gets an answer that says so;
 * - chunks are joined once per message, not once per chunk.
 */

import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** 64 MiB: above any tool result a model can use, far above the SDK's 10 MB default. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

export interface Oversized {
  /** The JSON-RPC id, when the message's first or last bytes show it. */
  id: string | number | undefined;
  /** `response`: a result or an error; `request`: it has a method and an id. */
  kind: 'response' | 'request' | 'unknown';
  bytes: number;
}

/** How much of a skipped message is kept to find its id and kind. */
const EDGE = 512;

const ID = String.raw`"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")`;
const ID_FIRST = new RegExp(String.raw`^\s*\{(?:\s*"jsonrpc"\s*:\s*"2\.0"\s*,)?\s*${ID}`);
const ID_LAST = new RegExp(String.raw`${ID}\s*\}\s*$`);

function idOf(head: string, tail: string): string | number | undefined {
  const m = ID_FIRST.exec(head) ?? ID_LAST.exec(tail);
  if (m === null) return undefined;
  try {
    return JSON.parse(m[1]) as string | number;
  } catch {
    return undefined;
  }
}

function kindOf(head: string, tail: string): Oversized['kind'] {
  const start = /^\s*\{(?:\s*"(?:jsonrpc|id)"\s*:\s*(?:"(?:[^"\\]|\\.)*"|-?\d+)\s*,)*\s*"(\w+)"/.exec(head)?.[1];
  if (start === 'result' || start === 'error') return 'response';
  if (start === 'method') return 'request';
  return 'unknown';
}

/** What the SDK's own reader does with a line. */
export function parseMessage(line: string): JSONRPCMessage {
  return JSONRPCMessageSchema.parse(JSON.parse(line));
}

export class MessageLines {
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** Skipping a message over the limit: its first bytes, and its last ones so far. */
  private skipping: { head: Buffer; tail: Buffer; bytes: number } | undefined;
  private readonly ready: Array<JSONRPCMessage | Error> = [];

  constructor(
    private readonly maxMessageBytes: number,
    /** Told of each message skipped; may return a message to deliver in its place. */
    private readonly onOversized: (o: Oversized) => JSONRPCMessage | undefined,
    /** Reads one line: the message, or undefined to keep it from the reader; throws for a
     * line that is not a JSON-RPC message. */
    private readonly read: (line: string) => JSONRPCMessage | undefined = parseMessage,
  ) {}

  append(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      const nl = chunk.indexOf(0x0a, at);
      const end = nl === -1 ? chunk.length : nl;
      this.take(chunk.subarray(at, end));
      if (nl === -1) return;
      this.endLine();
      at = nl + 1;
    }
  }

  private take(part: Buffer) {
    if (part.length === 0) return;
    if (this.skipping !== undefined) {
      const s = this.skipping;
      s.bytes += part.length;
      s.tail = Buffer.concat([s.tail, part]).subarray(-EDGE);
      return;
    }
    this.chunks.push(part);
    this.bytes += part.length;
    if (this.bytes > this.maxMessageBytes) {
      const all = Buffer.concat(this.chunks);
      this.skipping = { head: Buffer.from(all.subarray(0, EDGE)), tail: Buffer.from(all.subarray(-EDGE)), bytes: all.length };
      this.chunks = [];
      this.bytes = 0;
    }
  }

  private endLine() {
    if (this.skipping !== undefined) {
      const { head, tail, bytes } = this.skipping;
      this.skipping = undefined;
      const h = head.toString('utf8');
      const t = tail.toString('utf8');
      const instead = this.onOversized({ id: idOf(h, t), kind: kindOf(h, t), bytes });
      if (instead !== undefined) this.ready.push(instead);
      return;
    }
    const line = Buffer.concat(this.chunks).toString('utf8').replace(/\r$/, '');
    this.chunks = [];
    this.bytes = 0;
    if (line.trim().length === 0) return;
    try {
      const message = this.read(line);
      if (message !== undefined) this.ready.push(message);
    } catch (err) {
      this.ready.push(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** The next message, or null; a line that was not a JSON-RPC message is thrown (the
   * transports report it to `onerror` and read on). */
  readMessage(): JSONRPCMessage | null {
    const next = this.ready.shift();
    if (next === undefined) return null;
    if (next instanceof Error) throw next;
    return next;
  }

  clear(): void {
    this.chunks = [];
    this.bytes = 0;
    this.skipping = undefined;
    this.ready.length = 0;
  }
}
