/**
 * Identity, in one place: for every framework helper, **who is calling** (the caller: the
 * scope a record belongs to) and **which call this is** (the tool call id, and where a
 * framework's ids can repeat, the turn that tells two calls with one id apart).
 *
 * The rule (SPEC, "Framework helpers"): a helper that cannot tell the caller or the call from
 * what the call carries refuses, with a `CannotTellError` (a TypeError) that names the option
 * that tells it (`scope`, `key`). It never falls back to a shared scope, the process's
 * identity, a session id a client may choose, an access token, or a digest that leaves
 * information out: each of those guesses toward sharing, and a wrong guess hands one user
 * another's result, or tells the model a side effect happened that never ran.
 *
 * | framework | who (scope) | which call | ids repeat? | what tells a repeated id apart |
 * | --- | --- | --- | --- | --- |
 * | LangChain / LangGraph | thread id, or `scope` | tool call id | numbered ones do | the id of the AI message that made the call (LangGraph gives every message one); none and a numbered id: refused (`unknownMessage`) |
 * | AI SDK | `scope` (required) | tool call id | numbered ones do (`call_0`) | `turnOfAiSdkCall`: the approval id, else a digest of the turn so far; a numbered id in a turn with no earlier answer, or a word-for-word repeat: refused |
 * | Mastra | memory thread, or `scope` | tool call id | yes | the run id and the AI SDK's turn |
 * | OpenAI Agents | `scope` (required) | call id | numbered ones do | the output item's id, else the call id when unique (`isUniqueCallId`), else a turn minted when the Runner asks `needsApproval`, which one invocation takes (openai-agents.ts: it wraps needsApproval and keeps turns in the store) |
 * | Claude Agent SDK | `scope`, or one scope for ids a provider makes unique (`isUniqueCallId`) | `tool_use` id | not Anthropic's | nothing needed; a numbered id needs a business key; other ids, or a business key, need `scope` |
 * | MCP server | a verified subject, the process's own stdio client, or `scope` (`callerOfMcpCall`) | the client's idempotency key, else the arguments within a window | n/a | n/a |
 * | durable engines (engine-step.ts) | the run (workflow run, invocation, run id) | the engine's step id + how many times the step's attempt called the function before | no (each step id is unique within its run) | n/a; outside a step: `notInStep` |
 *
 * A business key (`key`) names the call within its caller whatever its tool call id, so a
 * turn that cannot be told is no refusal then: only the caller must be known.
 */

import { createHash } from 'node:crypto';


/** JSON data: what a scope (who is calling) and a turn are made of. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * A helper could not tell who called or which call this is, and refused: `option` is the
 * option that tells it (`scope`: who is calling; `key`: a business key naming the call).
 * A TypeError, like every configuration error of the helpers; `code` is `CANNOT_TELL`.
 */
export class CannotTellError extends TypeError {
  readonly code = 'CANNOT_TELL';
  constructor(
    readonly option: 'scope' | 'key',
    message: string,
  ) {
    super(message);
    this.name = 'CannotTellError';
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

// ---------------------------------------------------------------------------------------
// MCP servers: who is calling.

/** What an MCP server's handler is given that names its caller: the MCP SDK's `extra`, fastmcp's `context`. */
export interface McpCallerSource {
  /** MCP SDK (Streamable HTTP behind bearer auth, or a transport that passes it): the verified token. */
  authInfo?: { token?: unknown; clientId?: unknown; extra?: Record<string, unknown> } | null;
  /** fastmcp: what the server's `authenticate` returned for this session. */
  session?: unknown;
  /** A transport's session id (Streamable HTTP's `Mcp-Session-Id`, which a client sends). */
  sessionId?: unknown;
}

/**
 * Where the call arrived, as far as the helper can see: `'process-stdio'` when it came in on
 * this process's own stdin (a stdio server serves the one client that started it),
 * `'unknown'` otherwise (an in-process transport, HTTP, fastmcp, a handler wrapped alone).
 */
export type McpArrival = 'process-stdio' | 'unknown';

/**
 * The verified subject a call carries: a `sub` claim in the MCP SDK's `authInfo.extra` (what
 * a token verifier puts there) or in fastmcp's session (what `authenticate` returned), with
 * its issuer (`iss`) when given. Never the token (a refreshed token is the same account),
 * never `clientId` (it names an app, shared by all of its users), never a session id.
 */
function subjectOf(source: unknown): Json | undefined {
  if (source === null || typeof source !== 'object') return undefined;
  const { sub, iss } = source as { sub?: unknown; iss?: unknown };
  if (typeof sub !== 'string' || sub.length === 0) return undefined;
  return typeof iss === 'string' && iss.length > 0 ? { subject: sub, issuer: iss } : { subject: sub };
}

/**
 * Who made an MCP call, when no `scope` option says: a verified subject, or on this
 * process's own stdio the server itself (`stdio`: its identity, so that a restarted server
 * replays); anything else is a `CannotTellError` that names `scope`.
 */
export function callerOfMcpCall(where: string, tool: string, source: McpCallerSource, arrival: McpArrival, stdioIdentity: () => string): Json {
  const auth = source.authInfo;
  if (auth !== undefined && auth !== null) {
    const subject = subjectOf(auth.extra);
    if (subject !== undefined) return subject;
    throw new CannotTellError(
      'scope',
      `${where}: tool "${tool}" was called with extra.authInfo that names no account (no extra.sub): its token changes when it is refreshed and its clientId names an app, ` +
        'so neither tells one account from another, and a record must never be shared across accounts nor split by a token refresh. ' +
        'Put the account in authInfo.extra.sub where you verify the token, or pass a "scope" option: { scope: ({ extra }) => extra.authInfo.extra.userId }.',
    );
  }
  if (source.session !== undefined && source.session !== null) {
    const subject = subjectOf(source.session);
    if (subject !== undefined) return subject;
    throw new CannotTellError(
      'scope',
      `${where}: tool "${tool}" was called in a fastmcp session whose data (what authenticate returned) has no "sub", so nothing says which of its fields is the account. ` +
        'Return { sub: accountId, ... } from authenticate, or pass a "scope" option: { scope: ({ extra }) => extra.session.userId }.',
    );
  }
  if (arrival === 'process-stdio') return { stdio: stdioIdentity() };
  const session = typeof source.sessionId === 'string' && source.sessionId.length > 0;
  throw new CannotTellError(
    'scope',
    `${where}: tool "${tool}" was called ${session ? 'in a session (Mcp-Session-Id) ' : ''}with nothing that names the account: ` +
      (session ? 'a session id is chosen or re-sent by the client and is not an account (a reconnected client gets another one); ' : '') +
      'an in-process or HTTP transport without authentication, fastmcp without authenticate, or a handler wrapped alone cannot tell one caller from another, ' +
      'and a record must never be shared across accounts. Pass a "scope" option that names the caller: { scope: ({ extra }) => accountOf(extra) }, ' +
      "or { scope: 'local' } for a server only one user ever reaches (a stdio server; idempotentServer() tells stdio by itself).",
  );
}

/**
 * Whether an MCP SDK server's transport is this process's own stdio (`StdioServerTransport`
 * on `process.stdin`/`process.stdout`): read from the transport the server is connected to,
 * never guessed from what a request lacks (an in-process transport lacks the same things).
 */
export function arrivalOf(transport: unknown): McpArrival {
  if (transport === null || typeof transport !== 'object') return 'unknown';
  const { _stdin, _stdout } = transport as { _stdin?: unknown; _stdout?: unknown };
  return _stdin === process.stdin && _stdout === process.stdout ? 'process-stdio' : 'unknown';
}

// ---------------------------------------------------------------------------------------
// The Claude Agent SDK: a tool_use id the provider makes unique needs no scope.

/**
 * Whether a tool call id is one its provider makes unique across every conversation: after
 * its lowercase prefix (`toolu_`, `toolu_vrtx_`, `tooluse_`, `call_`), at least 16
 * characters of a random alphabet (Anthropic's are 24, Bedrock's 22, a UUID 36). `toolu_01`
 * or `call_0` (a gateway or a fake API that numbers calls) is not: calls of two conversations
 * would meet under it.
 */
export function isUniqueCallId(id: string): boolean {
  return /^[A-Za-z0-9-]{16,}$/.test(id.replace(/^(?:[a-z]+_)+/, ''));
}

/**
 * Whether a tool call id is a number the provider counts from (`call_0`, `toolu_01`, `c1`,
 * `0`): such ids restart with every request, so within one conversation only a turn tells
 * two calls apart. A random id, even a short one (Mistral's nine characters), does not
 * repeat within a conversation.
 */
export function isNumberedCallId(id: string): boolean {
  return /^(?:[A-Za-z]+[_-])*[A-Za-z]{0,8}\d{1,6}$/.test(id);
}

// ---------------------------------------------------------------------------------------
// LangChain and LangGraph: the AI message that made the call tells its turn.

/**
 * The refusal for a LangChain/LangGraph call whose AI message is not in the state (or has no
 * id) and whose id is numbered (`isNumberedCallId`): a later turn's `call_0` would be this
 * call. (LangGraph's messages reducer gives every message an id, so `createAgent` and a
 * `ToolNode` over a messages state always have one.)
 */
export function unknownMessage(where: string, toolCallId: string): CannotTellError {
  return new CannotTellError(
    'key',
    `${where}: tool call ${toolCallId}: the AI message that made it is not in the state (or has no id), and the id is one a provider numbers (it restarts with every request), ` +
      'so nothing tells this call from a later turn\'s call that reuses the id. Run the tool from a graph whose state holds the messages (createAgent, a ToolNode over MessagesAnnotation), ' +
      'or give the tool a business key: { key: (input) => `order-${input.orderId}` }.',
  );
}

// ---------------------------------------------------------------------------------------
// The AI SDK (and Mastra, which passes the AI SDK's messages): which turn a call is in.

type Part = { type?: unknown; toolCallId?: unknown; toolName?: unknown; input?: unknown; approvalId?: unknown; approved?: unknown; reason?: unknown } | null;

function partsOf(message: unknown): NonNullable<Part>[] {
  const content = (message as { content?: unknown } | null)?.content;
  return Array.isArray(content) ? (content as Part[]).filter((p): p is NonNullable<Part> => p !== null && typeof p === 'object') : [];
}

function roleOf(message: unknown): unknown {
  return (message as { role?: unknown } | null)?.role;
}

function hasPart(message: unknown, type: string, toolCallId: string): boolean {
  return partsOf(message).some((p) => p.type === type && p.toolCallId === toolCallId);
}

/**
 * The assistant message in `messages` that made the call (its index), or -1 when it is not
 * there. While the call executes in the step that produced it, `messages` ends just before
 * that assistant message; when it runs later (an approved call, a resubmitted history) the
 * message is in `messages`, with no result for the call after it. An earlier call with the
 * same id (providers that restart ids at `call_0`) has its result after it.
 */
export function callMessageIndex(messages: unknown, toolCallId: string): number {
  if (!Array.isArray(messages)) return -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m === null || typeof m !== 'object') continue;
    if (roleOf(m) === 'tool' && hasPart(m, 'tool-result', toolCallId)) return -1; // an earlier call with this id, finished
    if (roleOf(m) === 'assistant' && hasPart(m, 'tool-call', toolCallId)) return i;
  }
  return -1;
}

/**
 * Bookkeeping on a message or on one of its parts, not what was said: provider options and
 * metadata, and the ids and timestamps a framework adds (Mastra's `id`, `createdAt`). Left
 * out only there, on the envelope: inside a tool's input or output every field counts (a
 * payment's `id` in a result is what tells one step from the next).
 */
const ENVELOPE = new Set(['providerOptions', 'providerMetadata', 'experimental_providerMetadata', 'providerExecuted', 'id', 'createdAt']);

/** Stable text of a value for a digest: sorted keys, bytes as hex, dates as ISO text; nothing left out. */
function valueText(value: unknown, depth = 0): string {
  if (depth > 256) throw new TypeError('a message nested more than 256 levels deep');
  if (value === null || typeof value === 'number' || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return JSON.stringify(`bigint:${value}`);
  if (value instanceof Uint8Array) return JSON.stringify(`bytes:${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}`);
  if (value instanceof ArrayBuffer) return JSON.stringify(`bytes:${Buffer.from(value).toString('hex')}`);
  if (value instanceof URL) return JSON.stringify(`url:${value.href}`);
  if (value instanceof Date) return JSON.stringify(`date:${Number.isNaN(value.getTime()) ? 'invalid' : value.toISOString()}`);
  if (Array.isArray(value)) return `[${value.map((v) => valueText(v, depth + 1)).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined && typeof v !== 'function' && typeof v !== 'symbol')
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${valueText(v, depth + 1)}`).join(',')}}`;
  }
  return 'null';
}

/** An envelope (a message, or a part of one) without its bookkeeping; its values whole. */
function withoutBookkeeping(envelope: unknown): unknown {
  if (envelope === null || typeof envelope !== 'object' || Array.isArray(envelope)) return envelope;
  return Object.fromEntries(Object.entries(envelope as Record<string, unknown>).filter(([k]) => !ENVELOPE.has(k)));
}

/** A message as the digest sees it: its role and content, each part without its envelope's bookkeeping. */
function messageForDigest(message: unknown): unknown {
  const m = withoutBookkeeping(message) as { role?: unknown; content?: unknown } | unknown;
  if (m === null || typeof m !== 'object') return m;
  const content = (m as { content?: unknown }).content;
  return { ...(m as object), content: Array.isArray(content) ? content.map(withoutBookkeeping) : content };
}

function digestOf(messages: unknown[]): string {
  return sha256(valueText(messages.map(messageForDigest))).slice(0, 32);
}

/**
 * Where the turn of a call at `end` (exclusive) starts: at the assistant message before the
 * last user message (the previous answer, then what the user said; the first message when
 * there is none), or earlier, at an
 * earlier assistant message that made a call with this same id (a provider that restarts
 * ids): the turn then holds that call and its result, so a later call reusing the id, in a
 * later step of one generation or a later turn, covers more than the earlier one did.
 * Never a position counted from the start: chats cap their history, and a trimmed history
 * must be the same call.
 */
function turnStart(messages: unknown[], end: number, toolCallId: string): number {
  let user = -1;
  for (let i = end - 1; i >= 0; i--) {
    if (roleOf(messages[i]) === 'user') {
      user = i;
      break;
    }
  }
  // The previous answer; none (the first turn, or no user message): from the first message.
  let start = 0;
  for (let i = user - 1; i >= 0; i--) {
    if (roleOf(messages[i]) === 'assistant') {
      start = i;
      break;
    }
  }
  for (let i = end - 1; i >= 0; i--) {
    if (roleOf(messages[i]) === 'assistant' && hasPart(messages[i], 'tool-call', toolCallId)) {
      start = Math.min(start, i);
      break;
    }
  }
  return start;
}

/** The turn of an AI SDK call, and the earlier call with its id that the turn starts at, if any. */
export interface AiSdkTurn {
  /** `approval:<id>`, `message:<digest>` or `step:<digest>`. */
  turn: string;
  /**
   * The earlier call with this id (answered, in an earlier turn) that the turn starts at.
   * A turn that repeats that one word for word, result and all, under a history capped to
   * the same window, has the same digest: a stored result may then be that call's
   * (`mayBeEarlierCall`).
   */
  earlier?: { toolName: unknown; input: unknown; output: unknown };
  /**
   * The history the call came with shows no answer before the user message that opened its
   * turn (the first turn it shows: a chat's first request, or an app that sends only the
   * last message): a retry of the request and a new request in the same words are the same
   * text, in every step of the generation.
   */
  opening: boolean;
}

/**
 * The turn of an AI SDK tool call, from what the call itself carries (the `messages` its
 * `execute` gets), never from its position in them:
 * - the call is in `messages` (an approved call, run in the request after the one that
 *   asked): its approval id (`approval:<id>`, unique to one request), else a digest of its
 *   turn up to the assistant message that made it (`message:<digest>`);
 * - the call was just made, in this step: a digest of its turn so far (`step:<digest>`):
 *   from the previous answer (or from an earlier call with this id) through what the user
 *   said and every step of this generation before this one. A retry of the request is the
 *   same turn; a later step or turn whose call reuses the id (`call_0`) is another.
 * Undefined when `messages` is missing (the tool was called by hand without them): then
 * nothing tells the turn.
 */
export function turnOfAiSdkCall(messages: unknown, toolCallId: string): AiSdkTurn | undefined {
  if (!Array.isArray(messages)) return undefined;
  const at = callMessageIndex(messages, toolCallId);
  let start: number;
  let turn: string;
  if (at !== -1) {
    const request = partsOf(messages[at]).find((p) => p.type === 'tool-approval-request' && p.toolCallId === toolCallId && typeof p.approvalId === 'string');
    if (request !== undefined) return { turn: `approval:${request.approvalId as string}`, opening: false };
    start = turnStart(messages, at, toolCallId);
    turn = `message:${digestOf(messages.slice(start, at + 1))}`;
  } else {
    start = turnStart(messages, messages.length, toolCallId);
    turn = `step:${digestOf(messages.slice(start))}`;
  }
  // No answer before the user message that opened the call's turn (steps of this generation do not count).
  const end = at === -1 ? messages.length : at;
  let user = -1;
  for (let i = end - 1; i >= 0; i--) {
    if (roleOf(messages[i]) === 'user') {
      user = i;
      break;
    }
  }
  const opening = !messages.slice(0, Math.max(user, 0)).some((m) => roleOf(m) === 'assistant');
  const earlier = earlierCallAt(messages, start, toolCallId);
  return earlier === undefined ? { turn, opening } : { turn, earlier, opening };
}

/** The call with this id made by the assistant message at `index`, with its answer, if the turn starts at one. */
function earlierCallAt(messages: unknown[], index: number, toolCallId: string): AiSdkTurn['earlier'] {
  if (roleOf(messages[index]) !== 'assistant') return undefined;
  const call = partsOf(messages[index]).find((p) => p.type === 'tool-call' && p.toolCallId === toolCallId);
  if (call === undefined) return undefined;
  for (let j = index + 1; j < messages.length; j++) {
    const answer = partsOf(messages[j]).find((p) => p.type === 'tool-result' && p.toolCallId === toolCallId) as { output?: unknown; result?: unknown } | undefined;
    if (answer === undefined) continue;
    // ai 5+: output { type: 'json' | 'text' | ..., value }; ai 4 (Mastra's memory): result.
    const output = answer.output as { value?: unknown } | undefined;
    const value = output !== null && typeof output === 'object' && 'value' in output ? output.value : (answer.result ?? output);
    return { toolName: call.toolName, input: call.input, output: value };
  }
  return undefined;
}

/**
 * When a stored result under a call's key may not be this call's own, why: the turn starts at
 * an earlier call with this id, tool and input, answered with the very result stored (a turn
 * that repeats the last one word for word, under a history capped to the same window). The
 * helper cannot tell a retry of this request from a new call in the same words, and refuses
 * (a business key tells). Undefined when the turn leaves no such doubt.
 */
export function ambiguousReplayOf(turn: AiSdkTurn, toolName: string | undefined): ((input: unknown, stored: unknown) => string | undefined) | undefined {
  const earlier = turn.earlier;
  if (earlier === undefined) return undefined;
  return (input, stored) => {
    if (toolName !== undefined && earlier.toolName !== undefined && earlier.toolName !== toolName) return undefined;
    try {
      const sameInput = valueText(earlier.input) === valueText(input) || (typeof earlier.input === 'string' && valueText(JSON.parse(earlier.input)) === valueText(input));
      if (!sameInput) return undefined;
      const sameResult = valueText(earlier.output) === valueText(stored) || (typeof earlier.output === 'string' && earlier.output === JSON.stringify(stored));
      if (!sameResult) return undefined;
    } catch {
      return undefined;
    }
    return 'repeats, word for word, an earlier call with the same id, input and result, and the history it came with holds nothing else that tells them apart (a history capped to the same window)';
  };
}

/**
 * A call that no turn can be told for: its id is numbered (`isNumberedCallId`) and the history
 * it came with shows no answer before it. An app that sends only the last message, a chat's
 * first request and its retry all read the same, so a key from them would be shared by
 * different requests in the same words. Refused on every such call, not only on a repeat: a
 * refusal that came only on a retry would hand the model an error it answers by calling
 * again, under a turn that then reads as new.
 */
export function openingWithNumberedId(where: string, turn: AiSdkTurn, toolCallId: string): CannotTellError | undefined {
  if (!turn.opening || !isNumberedCallId(toolCallId)) return undefined;
  return new CannotTellError(
    'key',
    `${where}: tool call ${toolCallId} has an id the provider numbers (it restarts with every request), and the history it came with shows no earlier answer, ` +
      'so nothing tells this request from a retry of it or from a later one in the same words (an app that sends only the last message reads the same every time). ' +
      'Give the tool a business key that names the call: { key: (input) => `order-${input.orderId}` }.',
  );
}

// ---------------------------------------------------------------------------------------
// Durable execution engines: a side effect called outside any step the engine can name.

/**
 * The refusal for a side effect wrapped for an engine and called where the engine names no
 * step (outside an activity, a `step.run`, a step function, a task run): the engine's step
 * identity is the call, so without it nothing tells this call from another (another run,
 * another step, a retry), and a guess would share one record among them. A business key names
 * the call by itself.
 */
export function notInStep(where: string, name: string, needs: string): CannotTellError {
  return new CannotTellError(
    'key',
    `${where}: "${name}" was called outside ${needs}, so nothing names this call (the key is the step's identity as the engine keeps it, and how many ` +
      'times the step called it before). Call it inside one, or give it a business key that names the call: { key: (order) => `charge-${order.id}` }.',
  );
}

