/**
 * `idempotent-tools/mcp-server`: an MCP server's own write tools, safe to retry.
 *
 * ```ts
 * import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
 * import { idempotentServer } from 'idempotent-tools/mcp-server';
 *
 * const server = idempotentServer(new McpServer({ name: 'payments', version: '1.0.0' }));
 * server.registerTool('send_payment', { inputSchema: { orderId: z.string(), cents: z.number() } }, async (args) => ...);
 * ```
 *
 * The proxy (`idempotent-tools mcp`) guards a server from outside, where it cannot know who is
 * calling; inside, the server does: every key here is scoped to the caller, so two accounts
 * never share a record. A call is its client's idempotency key when it sends one (the
 * spellings the proxy reads, mcp-call.ts), else its canonical arguments within a window, as
 * in the proxy, with the proxy's rules: the same key with other arguments is refused
 * (JSON-RPC -32010, `KEY_MISMATCH`), a duplicate in flight waits for the first call,
 * `readOnlyHint` tools pass, a client's cancel does not stop a guarded call (it finishes and
 * is recorded for the retry), `isError` results are failures that run again, replays are
 * marked in `_meta`, and no two numbers are one key.
 *
 * Imports nothing from the MCP SDK (or fastmcp): it reads the objects they pass.
 */

import { createHash } from 'node:crypto';

import { Unencodable, canonicalJson, withToJsonApplied } from '../core/canonical.js';
import { type IdempotencyEvent } from '../core/events.js';
import { type IdempotentFunction, idempotent } from '../core/idempotent.js';
import { WAIT_SIGNAL, type WaitingOptions } from '../core/options.js';
import type { Store } from '../core/store.js';
import { BadCall, REPLAYED, clientKey, guardErrorOf, INVALID_PARAMS, keyInArguments, withClientKey } from './mcp-call.js';
import { CannotTellError, type McpArrival, arrivalOf, callerOfMcpCall } from './identity.js';
import { commandIdentity } from './mcp-identity.js';
import { eitherSignal, inputEnded } from './mcp-wait.js';
import { type Json, describe, scopeLabel } from './shared.js';

export type { Json } from './shared.js';

/** A tool's answer, as MCP has it. */
export type CallToolResult = Record<string, unknown> & { content?: unknown[]; isError?: boolean; _meta?: Record<string, unknown> };

/** What the MCP SDK's `RequestHandlerExtra` (1.x) carries that this helper reads. */
export interface RequestExtraLike {
  signal?: AbortSignal;
  /** The authenticated principal (Streamable HTTP with a bearer-auth middleware). */
  authInfo?: { token?: string; clientId?: string; scopes?: string[]; extra?: Record<string, unknown> };
  /** The Streamable HTTP session (`Mcp-Session-Id`). */
  sessionId?: string;
  _meta?: Record<string, unknown>;
  requestId?: string | number;
  /** The HTTP request's headers (absent on stdio). */
  requestInfo?: unknown;
}

/** What fastmcp's `execute(args, context)` gets that this helper reads. */
export interface FastMcpContextLike {
  signal?: AbortSignal;
  /** What the server's `authenticate` returned for this session. */
  session?: unknown;
  sessionId?: string;
  requestId?: string | number;
}

/** What a call is asked for its scope (the `scope` option). */
export interface ScopeRequest {
  /** The tool's name. */
  tool: string;
  /** The arguments as the client sent them. */
  args: Record<string, unknown>;
  /** The MCP SDK's request extra (authInfo, sessionId, ...), or fastmcp's context. */
  extra: RequestExtraLike & FastMcpContextLike;
}

export interface McpServerToolOptions {
  /** Where records live. Default: `defaultStore()`. */
  store?: Store;
  /**
   * Who is calling: the records of one scope are never another's. Default: the verified
   * account the call carries, a `sub` claim (`extra.authInfo.extra.sub`, as your token
   * verifier sets it; fastmcp: `sub` in what `authenticate` returned), else, for
   * `idempotentServer` on this process's own stdio, the server itself (a stdio server serves
   * the one user who started it). Anything else is refused with a `CannotTellError` (a
   * TypeError) naming this option: a session id (a client sends it, and a reconnect gets
   * another), an access token (refreshed, it would run a retry twice), an OAuth clientId (an
   * app, shared by its users), an in-process or unauthenticated HTTP transport, and a handler
   * wrapped alone with `idempotentTool` (it never sees its transport). A JSON value, or a
   * function of `{ tool, args, extra }` (`({ extra }) => extra.authInfo.extra.accountId`;
   * `'local'` for a server only one user ever reaches).
   */
  scope?: Json | ((request: ScopeRequest) => Json | undefined);
  /** How long a repeat counts as a retry, in ms, counted from the first call's end (default 10 minutes, as the proxy's). A client's key holds as long. */
  windowMs?: number;
  /** How long a duplicate waits for the same call in flight (default 10 minutes, as the proxy's). */
  pollTimeoutMs?: number;
  /**
   * A duplicate of a call still in flight: `'block'` (default) waits for its result (up to
   * `pollTimeoutMs`, or until its own request is cancelled or its client leaves); `'raise'`
   * refuses it at once with SEP-3182's `idempotency_key_in_progress` (the client retries later).
   */
  onDuplicate?: 'block' | 'raise';
  /** How long a call's claim lives without renewal (renewed while it runs; default 30 s). */
  leaseMs?: number;
  /** A result with `isError: true`: `'rerun'` (default) records a failure, the next call runs again; `'replay'` records it as the call's outcome. */
  isError?: 'rerun' | 'replay';
  /** A client's cancel: `'finish'` (default) keeps it from the tool, which finishes and is recorded for the retry; `'forward'` aborts the tool's `signal`. */
  cancel?: 'finish' | 'forward';
  /** Where a tool carries its idempotency key inside its arguments (`["meta", "idempotency-key"]`), as the proxy's `keyPath`. */
  keyPath?: string[];
  /** Every outcome (executed, replayed, failed, ...). */
  onEvent?: (event: IdempotencyEvent) => void;
  /** The server's name in records (`<server>/<tool>`) and keys. Default: the name the McpServer was created with (`idempotentTool`: `"mcp-server"`). */
  server?: string;
}

export interface McpServerOptions extends McpServerToolOptions {
  /** Options per tool name, or `false` to leave a tool unguarded. */
  tools?: Record<string, Omit<McpServerToolOptions, 'store' | 'server' | 'scope'> | false>;
  /** Tools without side effects, left unguarded (as `readOnlyHint: true` tools are). */
  readOnly?: string[];
}

const WHERE = 'idempotent-tools/mcp-server';
const MINUTES_10 = 10 * 60_000;
const TOOL_OPTIONS = new Set(['store', 'scope', 'windowMs', 'pollTimeoutMs', 'onDuplicate', 'leaseMs', 'isError', 'cancel', 'keyPath', 'onEvent', 'server']);

/** A call the guard refused or could not run, as the JSON-RPC error the SDK sends for it. */
export class McpCallError extends Error {
  override readonly name = 'McpCallError';
  constructor(readonly code: number, message: string, readonly data?: Record<string, unknown>) {
    super(message);
  }
}

/** A tool's `isError: true` result under `isError: 'rerun'`: thrown so that its record is `failed`, then handed back. */
class ToolErrorResult extends Error {
  constructor(readonly result: CallToolResult, readonly owner: object) {
    super(errorText(result));
    this.name = 'ToolError';
  }
}

function errorText(result: CallToolResult): string {
  const content = Array.isArray(result.content) ? result.content : [];
  const text = content.find((c): c is { type: 'text'; text: string } => (c as { type?: unknown })?.type === 'text' && typeof (c as { text?: unknown }).text === 'string');
  return (text?.text ?? 'the tool returned isError: true').slice(0, 500);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The stdio server's own identity (computed once: it is the process's). */
let processIdentity: string | undefined;
function thisServer(): string {
  processIdentity ??= commandIdentity({ command: process.execPath, args: process.argv.slice(1), cwd: process.cwd(), env: process.env });
  return processIdentity;
}

/** Who is calling: the "scope" option's answer, else the caller the call carries (identity.ts), else a CannotTellError naming "scope". */
function scopeOf(option: McpServerToolOptions['scope'], request: ScopeRequest, arrival: McpArrival): Json {
  if (option === undefined) return callerOfMcpCall(WHERE, request.tool, request.extra, arrival, thisServer);
  let value: Json | undefined;
  try {
    value = typeof option === 'function' ? option(request) : option;
  } catch (err) {
    throw new TypeError(`${WHERE}: the "scope" option threw: ${err instanceof Error ? err.message : String(err)}. It must return who is calling (an account id, or JSON data).`, { cause: err });
  }
  if (value === undefined || value === null || value === '') {
    throw new CannotTellError('scope', `${WHERE}: the "scope" option returned ${describe(value)} for tool "${request.tool}"; it must name who is calling (an account id), so that two accounts never share a record.`);
  }
  return value;
}

/**
 * The proxy carries a number a double cannot keep exactly as itself; a server gets its
 * arguments from `JSON.parse`, which has already rounded it (`1790000000000000001` and
 * `…002` both arrive as `1790000000000000000`). Keyed, two calls would be one: refused.
 */
function checkExactNumbers(value: unknown, path: string): void {
  if (typeof value === 'number') {
    if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
      throw new BadCall(
        `${path} is ${value}, an integer beyond ±2^53 that JSON.parse may have rounded on its way in (two different numbers can arrive as this one), ` +
          'so the call cannot be keyed exactly and did not run. Send such a number as a string.',
      );
    }
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) value.forEach((v, i) => checkExactNumbers(v, `${path}[${i}]`));
  else for (const [k, v] of Object.entries(value)) checkExactNumbers(v, /^[A-Za-z_$][\w$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`);
}

/** One call on its way through the guard. */
interface Invocation {
  run: () => Promise<CallToolResult>;
  ran: boolean;
  scope: Json;
  rerunErrors: boolean;
  /** Fires when this request is cancelled or its client leaves: a wait for the same call in flight ends. */
  waitSignal: AbortSignal | undefined;
}

/**
 * The one function the core wraps for every tool (what runs travels in the invocation):
 * servers are often built per request (stateless HTTP), and the function a name is
 * wrapped with must be the same every time.
 */
async function runInvocation(_args: Record<string, unknown>, invocation: Invocation): Promise<CallToolResult> {
  invocation.ran = true;
  // The client reads the result as JSON either way: a Date is its ISO string on the first call too.
  const result = withToJsonApplied(await invocation.run()) as CallToolResult;
  if (invocation.rerunErrors && result !== null && typeof result === 'object' && result.isError === true) throw new ToolErrorResult(result, invocation);
  return result;
}

interface ToolPolicy {
  windowMs: number;
  pollTimeoutMs: number;
  onDuplicate: 'block' | 'raise';
  leaseMs: number;
  isError: 'rerun' | 'replay';
  cancel: 'finish' | 'forward';
  keyPath?: string[];
}

function checkOptions(options: Record<string, unknown>, allowed: Set<string>, what: string): void {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new TypeError(`${WHERE}: ${what} must be an object, not ${describe(options)}`);
  for (const k of Object.keys(options)) {
    if (!allowed.has(k)) throw new TypeError(`${WHERE}: "${k}" is not an option of ${what}; the options are ${[...allowed].join(', ')}`);
  }
}

function policyOf(o: McpServerToolOptions, where: string): ToolPolicy {
  for (const f of ['windowMs', 'pollTimeoutMs', 'leaseMs'] as const) {
    const v = o[f];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)) throw new RangeError(`${WHERE}: ${where}"${f}" must be a number of milliseconds > 0, not ${describe(v)}`);
  }
  if (o.onDuplicate !== undefined && o.onDuplicate !== 'block' && o.onDuplicate !== 'raise') {
    throw new TypeError(`${WHERE}: ${where}"onDuplicate" must be "block" or "raise", not ${describe(o.onDuplicate)}`);
  }
  if (o.isError !== undefined && o.isError !== 'rerun' && o.isError !== 'replay') throw new TypeError(`${WHERE}: ${where}"isError" must be "rerun" or "replay", not ${describe(o.isError)}`);
  if (o.cancel !== undefined && o.cancel !== 'finish' && o.cancel !== 'forward') throw new TypeError(`${WHERE}: ${where}"cancel" must be "finish" or "forward", not ${describe(o.cancel)}`);
  if (o.keyPath !== undefined && (!Array.isArray(o.keyPath) || o.keyPath.length === 0 || !o.keyPath.every((p) => typeof p === 'string' && p.length > 0))) {
    throw new TypeError(`${WHERE}: ${where}"keyPath" must be a list of property names, such as ["meta", "idempotency-key"], not ${describe(o.keyPath)}`);
  }
  if (o.onEvent !== undefined && typeof o.onEvent !== 'function') throw new TypeError(`${WHERE}: ${where}"onEvent" must be a function`);
  return {
    windowMs: o.windowMs ?? MINUTES_10,
    pollTimeoutMs: o.pollTimeoutMs ?? MINUTES_10,
    onDuplicate: o.onDuplicate ?? 'block',
    leaseMs: o.leaseMs ?? 30_000,
    isError: o.isError ?? 'rerun',
    cancel: o.cancel ?? 'finish',
    ...(o.keyPath === undefined ? {} : { keyPath: o.keyPath }),
  };
}

/** A signal that no client's cancel reaches (`cancel: 'finish'`). */
const NEVER = new AbortController().signal;

/** The guard of one server (or one handler): one `idempotent()` wrapper per tool. */
class CallGuard {
  private readonly wrappers = new Map<string, IdempotentFunction<[Record<string, unknown>, Invocation], CallToolResult>>();

  constructor(
    private readonly store: Store | undefined,
    private readonly server: () => string,
    private readonly scope: McpServerToolOptions['scope'],
    private readonly onEvent: ((event: IdempotencyEvent) => void) | undefined,
    /** Where calls arrive: this process's own stdio (a server's transport says), or not known. */
    private readonly arrival: () => McpArrival,
  ) {}

  private wrapperFor(tool: string, policy: ToolPolicy) {
    let wrapped = this.wrappers.get(tool);
    if (wrapped !== undefined) return wrapped;
    const server = this.server();
    const options: WaitingOptions<[Record<string, unknown>, Invocation]> = {
      name: `${server}/${tool}`,
      ...(this.store === undefined ? {} : { store: this.store }),
      // A retry guard, not a cache: after the window the same call is new work.
      ttlMs: policy.windowMs,
      onDuplicate: policy.onDuplicate,
      pollTimeoutMs: policy.pollTimeoutMs,
      leaseMs: policy.leaseMs,
      // The arguments identify the call within its caller's scope; how to run it does not.
      payload: (args) => args,
      context: (_args, invocation) => ({ mcpServer: server, scope: invocation.scope }),
      meta: (_args, invocation) => ({ framework: 'mcp-server', scope: scopeLabel(invocation.scope) }),
      ...(this.onEvent === undefined ? {} : { onEvent: this.onEvent }),
      // A duplicate waiting for the same call in flight stops when its request is gone.
      [WAIT_SIGNAL]: (_args, invocation) => invocation.waitSignal,
    };
    wrapped = idempotent(runInvocation, options);
    this.wrappers.set(tool, wrapped);
    return wrapped;
  }

  /**
   * The call under the guard: run once, replayed from the store after (marked in `_meta`).
   * A duplicate that waits for the same call in flight stops when `extra.signal` fires (a
   * cancel; the SDK's transport closing) or `clientGone` does (a stdio client that closed
   * its end, which the SDK does not report).
   */
  async call(
    tool: string,
    params: { arguments?: unknown; _meta?: unknown; idempotencyKey?: unknown },
    extra: RequestExtraLike & FastMcpContextLike,
    policy: ToolPolicy,
    run: (signal: AbortSignal | undefined) => Promise<CallToolResult>,
    clientGone?: AbortSignal,
  ): Promise<CallToolResult> {
    const args = params.arguments !== null && typeof params.arguments === 'object' && !Array.isArray(params.arguments) ? (params.arguments as Record<string, unknown>) : {};
    const inArguments = policy.keyPath === undefined ? undefined : keyInArguments(args, policy.keyPath);
    const explicit = clientKey({ _meta: params._meta as Record<string, unknown> | undefined, idempotencyKey: params.idempotencyKey }) ?? inArguments?.key;
    const keyed = inArguments?.rest ?? args;
    checkExactNumbers(keyed, 'arguments');
    const scope = scopeOf(this.scope, { tool, args, extra }, this.arrival());
    try {
      canonicalJson(scope);
    } catch (err) {
      if (!(err instanceof Unencodable)) throw err;
      throw new TypeError(`${WHERE}: the scope of tool "${tool}" cannot be keyed: ${err.pathFrom('scope')} is ${err.what}. Return a string id (or JSON data) from "scope".`);
    }
    const signal = policy.cancel === 'forward' ? extra.signal : NEVER;
    const wrapped = this.wrapperFor(tool, policy);
    const request = eitherSignal([extra.signal, clientGone]);
    const invocation: Invocation = { run: () => run(signal), ran: false, scope, rerunErrors: policy.isError === 'rerun', waitSignal: request.signal };
    try {
      let result: CallToolResult;
      if (explicit === undefined) result = await wrapped(keyed, invocation);
      else {
        // Readable first (inspect --key <the client's key> finds it), then the server and the
        // caller: two accounts that send the same key are two calls.
        const key = `${explicit}|${this.server()}|${sha256(canonicalJson({ server: this.server(), scope })).slice(0, 32)}`;
        result = await wrapped.withKey(key)(keyed, invocation);
      }
      if (invocation.ran || result === null || typeof result !== 'object' || Array.isArray(result)) return result;
      return { ...result, _meta: { ...(result._meta ?? {}), [REPLAYED]: true } };
    } catch (err) {
      if (err instanceof ToolErrorResult && err.owner === invocation) return err.result;
      throw withClientKey(err, explicit); // a refusal names the client's key (SEP-3182's error.data)
    } finally {
      request.release();
    }
  }
}

/** The JSON-RPC error for what the guard threw; the tool's own errors go on as they were. */
function asCallError(err: unknown): unknown {
  const guard = guardErrorOf(err, WHERE);
  if (guard !== undefined) return new McpCallError(guard.code, guard.message, guard.data);
  if (err instanceof TypeError || err instanceof RangeError) return new McpCallError(INVALID_PARAMS, err.message);
  return err;
}

/** What `new McpServer(...)` is, as far as this helper reads it (SDK 1.x). */
export interface McpServerLike {
  server: object;
  registerTool?: (...args: any[]) => unknown;
}

/** Marks the tools/call handler this helper installed (guarding a server twice guards it once). */
const GUARDED = Symbol('idempotent-tools/mcp-server');

type LowLevelHandler = (request: { params?: Record<string, unknown> }, extra: RequestExtraLike) => Promise<unknown>;

/**
 * Guards every tool of an MCP SDK `McpServer` (1.x): the tools registered before this call
 * and after it. Call it before `connect()`. Returns the same server.
 *
 * It sits where the server answers `tools/call`, so it reads the request as the client sent
 * it (the arguments before your schema's parsing, `_meta`, the top-level `idempotencyKey`)
 * and answers the guard's refusals with the proxy's JSON-RPC errors. Tools with
 * `readOnlyHint: true`, in `readOnly` or `tools: { name: false }` pass; so do task-augmented calls.
 */
export function idempotentServer<S extends McpServerLike>(server: S, options: McpServerOptions = {}): S {
  checkOptions(options as Record<string, unknown>, new Set([...TOOL_OPTIONS, 'tools', 'readOnly']), 'idempotentServer(server, options)');
  const low = (server as { server?: unknown } | null)?.server as
    | { _requestHandlers?: unknown; registerCapabilities?: unknown; transport?: unknown; _serverInfo?: { name?: unknown } }
    | undefined;
  if (low === null || typeof low !== 'object' || !(low._requestHandlers instanceof Map)) {
    throw new TypeError(
      `${WHERE}: idempotentServer(server) takes an McpServer of @modelcontextprotocol/sdk 1.x (new McpServer({ name, version })), not ${describe(server)}. ` +
        'For one handler, or for fastmcp, wrap it with idempotentTool(handler, { name }).',
    );
  }
  const handlers = low._requestHandlers as Map<string, LowLevelHandler>;
  const { tools: perTool = {}, readOnly = [], ...defaults } = options;
  if (perTool === null || typeof perTool !== 'object' || Array.isArray(perTool)) throw new TypeError(`${WHERE}: option "tools" must be an object of tool names to options (or false)`);
  if (!Array.isArray(readOnly) || readOnly.some((n) => typeof n !== 'string')) throw new TypeError(`${WHERE}: option "readOnly" must be an array of tool names`);
  const basePolicy = policyOf(defaults, '');
  const policies = new Map<string, ToolPolicy | false>();
  for (const name of readOnly) policies.set(name, false);
  for (const [name, own] of Object.entries(perTool)) {
    if (own === false) policies.set(name, false);
    else {
      checkOptions(own as Record<string, unknown>, new Set(['windowMs', 'pollTimeoutMs', 'onDuplicate', 'leaseMs', 'isError', 'cancel', 'keyPath']), `tools["${name}"]`);
      policies.set(name, policyOf({ ...defaults, ...own }, `tools["${name}"]: `));
    }
  }
  if (!handlers.has('tools/call')) {
    // McpServer sets its tools/call handler with its first tool: set it now (before connect), so there is one to guard.
    const setUp = (server as unknown as { setToolRequestHandlers?: () => void }).setToolRequestHandlers;
    if (typeof setUp !== 'function') throw new TypeError(`${WHERE}: this McpServer has no tools/call handler to guard (register a tool first).`);
    try {
      setUp.call(server);
    } catch (err) {
      throw new TypeError(`${WHERE}: cannot guard this McpServer's tools: ${err instanceof Error ? err.message : String(err)}. Call idempotentServer() before connect().`);
    }
  }
  const inner = handlers.get('tools/call')!;
  if ((inner as { [GUARDED]?: true })[GUARDED]) return server; // guarded already
  declareIdempotency(low);
  const name = () => (typeof defaults.server === 'string' && defaults.server !== '' ? defaults.server : typeof low._serverInfo?.name === 'string' ? low._serverInfo.name : 'mcp-server');
  const guard = new CallGuard(defaults.store, name, defaults.scope, defaults.onEvent, () => arrivalOf(low.transport));
  const registered = () => ((server as unknown as { _registeredTools?: Record<string, { annotations?: { readOnlyHint?: unknown } }> })._registeredTools ?? {});
  const guarded: LowLevelHandler = async (request, extra) => {
    const params = (request?.params ?? {}) as Record<string, unknown>;
    const tool = params.name;
    const own = typeof tool === 'string' ? policies.get(tool) : false;
    const known = typeof tool === 'string' && Object.hasOwn(registered(), tool);
    // Not a tool of this server (its own error answers), a read-only tool, one left out, a task: as without the guard.
    if (!known || own === false || params.task !== undefined || registered()[tool as string]?.annotations?.readOnlyHint === true) return inner(request, extra);
    try {
      return await guard.call(
        tool as string,
        params,
        extra,
        own ?? basePolicy,
        (signal) => inner(request, signal === extra.signal ? extra : { ...extra, signal }) as Promise<CallToolResult>,
        inputEnded(low.transport),
      );
    } catch (err) {
      throw asCallError(err);
    }
  };
  Object.defineProperty(guarded, GUARDED, { value: true });
  handlers.set('tools/call', guarded);
  return server;
}

/**
 * SEP-3182's capability, `tools.idempotency: {}`: a client may rely on the server to keep a
 * repeated `idempotencyKey` from running twice. Capabilities are fixed at `connect()`: a
 * server guarded after it is guarded all the same, and says nothing.
 */
function declareIdempotency(low: { registerCapabilities?: unknown }): void {
  if (typeof low.registerCapabilities !== 'function') return;
  try {
    (low.registerCapabilities as (c: object) => void).call(low, { tools: { idempotency: {} } });
  } catch {
    // Connected already ("Cannot register capabilities after connecting to transport").
  }
}

/** A tool handler: the MCP SDK's `(args, extra)` (or `(extra)` for a tool without input), or fastmcp's `execute(args, context)`. */
export type ToolHandler<A, X, R> = (args: A, extra: X) => R | Promise<R>;

/**
 * Guards one tool handler: `server.registerTool(name, config, idempotentTool(handler, { name }))`
 * (MCP SDK), or `execute: idempotentTool(execute, { name })` (fastmcp). Keyed like
 * `idempotentServer` keys, from what the handler gets: the client's key in `_meta` (a handler
 * does not see the top-level `params.idempotencyKey`), the parsed arguments, the caller.
 * The guard's refusals reach the client as the framework renders a handler's error (an
 * `isError` result); `idempotentServer` answers them with the proxy's JSON-RPC errors.
 */
export function idempotentTool<A, X, R>(handler: ToolHandler<A, X, R>, options: McpServerToolOptions & { name?: string } = {}): (args: A, extra: X) => Promise<R> {
  if (typeof handler !== 'function') throw new TypeError(`${WHERE}: idempotentTool(handler, options) takes the tool's handler function, not ${describe(handler)}`);
  checkOptions(options as Record<string, unknown>, new Set([...TOOL_OPTIONS, 'name']), 'idempotentTool(handler, options)');
  const tool = typeof options.name === 'string' && options.name !== '' ? options.name : handler.name;
  if (tool === '') {
    throw new TypeError(`${WHERE}: idempotentTool(handler) got an anonymous handler: pass { name: 'send_payment' } (the tool's name), which is part of every key.`);
  }
  const policy = policyOf(options, '');
  const server = typeof options.server === 'string' && options.server !== '' ? options.server : 'mcp-server';
  // A handler alone never sees its transport: it cannot tell stdio from an in-process transport.
  const guard = new CallGuard(options.store, () => server, options.scope, options.onEvent, () => 'unknown');
  const wrapped = async function (this: unknown, first: A, second: X): Promise<R> {
    // The MCP SDK calls a tool without an input schema as handler(extra).
    const noInput = second === undefined && isExtra(first);
    const args = (noInput ? {} : first) as unknown;
    const extra = ((noInput ? first : second) ?? {}) as RequestExtraLike & FastMcpContextLike;
    const result = await guard.call(tool, { arguments: args, _meta: extra._meta }, extra, policy, async (signal) => {
      const given = signal === extra.signal ? extra : { ...extra, signal };
      const out = noInput ? await (handler as unknown as (x: unknown) => unknown).call(this, given) : await handler.call(this, first, given as X);
      return out as CallToolResult;
    });
    return result as R;
  };
  Object.defineProperty(wrapped, 'name', { value: tool });
  return wrapped;
}

function isExtra(value: unknown): boolean {
  return value !== null && typeof value === 'object' && 'signal' in value && ('requestId' in value || 'sendNotification' in value);
}
