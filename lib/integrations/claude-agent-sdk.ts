/**
 * `idempotent-tools/claude-agent-sdk`: the Claude Agent SDK's in-process tools
 * (`tool()` definitions for `createSdkMcpServer`), its permission answers (`canUseTool`), and
 * the external MCP servers of `options.mcpServers`, made safe to resume.
 *
 * ```ts
 * import { createSdkMcpServer, query, tool } from '@anthropic-ai/claude-agent-sdk';
 * import { idempotentTools } from 'idempotent-tools/claude-agent-sdk';
 *
 * const pay = createSdkMcpServer({ name: 'pay', tools: idempotentTools([sendPayment]) });
 * for await (const m of query({ prompt, options: { mcpServers: { pay }, allowedTools: ['mcp__pay__send_payment'] } })) ...
 * ```
 *
 * The trap: a resumed session (`resume`, `forkSession`) that goes on from a permission answer
 * or from tool calls in flight may first re-send the assistant message that made those calls.
 * The runtime passes each handler the model's `tool_use` id (`extra._meta["claudecode/toolUseId"]`),
 * which the re-sent message keeps: a call is that id (within an optional scope) and its input,
 * so the re-sent call replays the first one's `CallToolResult`. The session id is not part of
 * the key (a handler never sees it, and a fork gets a new one while its calls must replay).
 *
 * Imports nothing from the SDK: it reads what the runtime passes.
 */

import { createHash } from 'node:crypto';
import { join } from 'node:path';

import { canonicalJson } from '../core/canonical.js';
import { idempotent } from '../core/idempotent.js';
import { WAIT_SIGNAL, type WaitingOptions } from '../core/options.js';
import type { Store } from '../core/store.js';
import { defaultStore } from '../stores/default-store.js';
import { type ReportedDecision, recordReported } from './approval-guard.js';
import { CannotTellError, isNumberedCallId, isUniqueCallId } from './identity.js';
import { MCP_HEADERS, MCP_POSTGRES_URL, MCP_REDIS_URL, MCP_SCOPE, MCP_URL } from './mcp-proxy-env.js';
import { type Json, type ToolHelperOptions, type ToolSetChoices, copyTool, describe, idOf, scopeLabel, toolSetOptions, wrapToolCall } from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome, ToolReconcileRequest, ToolReconcileAnswer } from './shared.js';

const WHERE = 'idempotent-tools/claude-agent-sdk';

/** Where the runtime puts the model's tool_use id in a handler's `extra._meta`. */
export const TOOL_USE_ID = 'claudecode/toolUseId';

/** The scope of calls when none is given: Claude's tool_use ids are unique, so one scope holds them all. */
const DEFAULT_SCOPE = 'claude-agent-sdk';

/** A handler's answer (MCP's `CallToolResult`). */
export type CallToolResultLike = { content: unknown[]; isError?: boolean; structuredContent?: unknown; _meta?: Record<string, unknown> } & Record<string, unknown>;

/** The parts of the `extra` a handler gets (the MCP SDK's `RequestHandlerExtra`) that this helper reads. */
export interface ClaudeToolExtraLike {
  _meta?: Record<string, unknown>;
  signal?: AbortSignal;
}

/** What `tool()` makes (`SdkMcpToolDefinition`), as far as this helper reads it. */
export interface SdkToolLike {
  name: string;
  handler: (args: any, extra: unknown) => Promise<CallToolResultLike>;
}

export interface ClaudeToolOptions<I> extends ToolHelperOptions<I, CallToolResultLike> {
  /**
   * What the calls' ids are unique within: a conversation, user or tenant id (a JSON value, or
   * a function of `(input, extra)`). Anthropic's tool_use ids are unique (`toolu_` and 24
   * random characters), so for them it is optional (default: one scope for all). Required
   * (a `CannotTellError` naming it otherwise) with a business `key`, which holds within the
   * scope, and for ids that are not unique (a gateway or a fake API that numbers its calls).
   * Not the session id: a fork gets a new one, and its calls must replay. Give
   * `idempotentCanUseTool` the same scope.
   */
  scope?: Json | ((input: I, extra: ClaudeToolExtraLike) => Json | undefined);
}

/** The options of `idempotentTools`: every tool's options, and per-tool choices by tool name. */
export type ClaudeToolSetOptions = Omit<ClaudeToolOptions<any>, 'name'> & ToolSetChoices<Partial<ClaudeToolOptions<any>>>;

/**
 * The scope the option gives; without the option, one scope for every call, but only for a
 * call named by an id its provider makes unique (`isUniqueCallId`) and no business key
 * (which would then hold across every conversation): otherwise a CannotTellError naming
 * "scope".
 */
function scopeValue<A extends unknown[]>(scope: Json | ((...a: A) => Json | undefined) | undefined, call: A, hint: string, id?: { toolUseId: string; businessKey: boolean; tool: string }): Json {
  if (scope === undefined) {
    if (id === undefined) return DEFAULT_SCOPE;
    if (id.businessKey) {
      throw new CannotTellError(
        'scope',
        `${WHERE}: tool "${id.tool}" has a business key but no "scope": the key alone would be one call across every conversation, user and tenant (an order o-42 paid in one would be paid in all). ` +
          'Pass { scope: (input, extra) => conversationOrTenantId } (or a fixed id, to mean one for all).',
      );
    }
    if (!isUniqueCallId(id.toolUseId) && !isNumberedCallId(id.toolUseId)) {
      throw new CannotTellError(
        'scope',
        `${WHERE}: tool "${id.tool}" call ${id.toolUseId}: this tool_use id is not one a provider makes unique (Anthropic's are toolu_ and 24 random characters; a gateway or a fake API that numbers its calls restarts them), ` +
          'so without a "scope" calls of two conversations would meet under it. Pass { scope: (input, extra) => conversationId }.',
      );
    }
    return DEFAULT_SCOPE;
  }
  let value: Json | undefined;
  try {
    value = typeof scope === 'function' ? scope(...call) : scope;
  } catch (err) {
    throw new TypeError(`${WHERE}: the "scope" option threw: ${err instanceof Error ? err.message : String(err)}. ${hint}`, { cause: err });
  }
  if (value === undefined || value === null || value === '') throw new CannotTellError('scope', `${WHERE}: the "scope" option returned ${describe(value)}. ${hint}`);
  return value;
}

/** The refusal of a numbered tool_use id without a business key (see identify). */
function numberedIdRefusal(tool: string, toolUseId: string): CannotTellError {
  return new CannotTellError(
    'key',
    `${WHERE}: tool "${tool}" call ${toolUseId}: this tool_use id is a number the model's gateway counts (Anthropic's are toolu_ and 24 random characters), ` +
      'which restarts in every response, so neither the id nor a scope tells this call from a later one with the same input. ' +
      "Give the tool a business key that names the call: { tools: { " + tool + ": { key: (input) => `order-${input.orderId}` } } }.",
  );
}

const SCOPE_HINT = 'It must return the conversation, user or tenant the call belongs to (a string id or JSON data), the same for a resumed or forked session.';

function isErrorResult(result: unknown): result is CallToolResultLike {
  return result !== null && typeof result === 'object' && (result as { isError?: unknown }).isError === true;
}

function textOf(result: CallToolResultLike): string {
  const content = Array.isArray(result.content) ? result.content : [];
  const text = content.find((c) => (c as { type?: unknown })?.type === 'text' && typeof (c as { text?: unknown }).text === 'string') as { text: string } | undefined;
  return (text?.text ?? 'the tool returned isError: true').slice(0, 500);
}

/**
 * Wraps one tool handler `(args, extra) => CallToolResult`, keyed by the scope, the tool_use
 * id in `extra._meta` and the input. A handler called without that id (by another MCP
 * client, or by hand) is a TypeError, which the SDK's server hands back as an `isError` result.
 */
function wrapHandler<I>(name: string, handler: (args: I, extra: ClaudeToolExtraLike) => unknown, options: ClaudeToolOptions<I>): (args: I, extra: ClaudeToolExtraLike) => Promise<CallToolResultLike> {
  const { scope, ...rest } = options;
  if (scope !== undefined && typeof scope !== 'function') scopeValue(scope, [], SCOPE_HINT);
  return wrapToolCall<I, [ClaudeToolExtraLike], CallToolResultLike>(
    {
      name: 'claude-agent-sdk',
      generator: 'return-value',
      carriesToolName: false,
      identify: (input, [extra]) => {
        const toolCallId = idOf((extra as ClaudeToolExtraLike | undefined)?._meta?.[TOOL_USE_ID]);
        if (toolCallId === undefined) {
          throw new TypeError(
            `${WHERE}: tool "${name}" was called without the model's tool_use id (extra._meta["${TOOL_USE_ID}"]): ` +
              'let the Claude Agent SDK call it (in a createSdkMcpServer given to query()), or pass { _meta: { "claudecode/toolUseId": id } } as its second argument.',
          );
        }
        const conversation = scopeValue(scope, [input, extra], SCOPE_HINT, { toolUseId: toolCallId, businessKey: rest.key !== undefined, tool: name });
        // A numbered id (toolu_01: a gateway or a fake API that numbers its calls, restarting in
        // every response) tells no call from a later one, with a scope or without: a business key does.
        const numbered = rest.key === undefined && isNumberedCallId(toolCallId) ? numberedIdRefusal(name, toolCallId) : undefined;
        return {
          framework: 'claude-agent-sdk',
          toolCallId,
          toolName: name,
          signal: extra?.signal,
          scope: { conversation },
          conversation: { conversation },
          approvalScope: conversation,
          turn: null,
          ...(numbered === undefined ? {} : { turnUnknown: numbered }),
        };
      },
      // A CallToolResult with isError: true is a failure the model may retry: recorded as
      // failed (the next call runs again), handed to the runtime as it is.
      failedOutput: (result) => (isErrorResult(result) ? textOf(result) : undefined),
      approvals: {
        // Decisions come from canUseTool (idempotentCanUseTool records them); a call refused by
        // one is answered as the runtime answers a denied call: an error result the model reads.
        refused: (refusal) => ({
          content: [{ type: 'text', text: refusal.kind === 'rejected' ? (refusal.reason ?? `The user denied this call of ${name}.`) : refusal.error.message }],
          isError: true,
        }),
      },
    },
    handler as (args: I, extra: ClaudeToolExtraLike) => CallToolResultLike,
    { ...rest, name } as ClaudeToolOptions<I> & Record<string, unknown>,
  ) as (args: I, extra: ClaudeToolExtraLike) => Promise<CallToolResultLike>;
}

/**
 * Guards `tool()` definitions: returns new ones (same name, schema, annotations) whose
 * handlers run once per tool call (`createSdkMcpServer({ name, tools: idempotentTools([...]) })`).
 * Also takes what `createSdkMcpServer` returned, and guards its server's tools in place.
 * Tools in `readOnly` or `tools: { name: false }` are left as they are.
 */
export function idempotentTools<T extends readonly SdkToolLike[] | SdkServerConfigLike>(tools: T, options: ClaudeToolSetOptions = {}): T {
  if (isSdkServerConfig(tools)) {
    guardSdkServer(tools, options);
    return tools;
  }
  if (!Array.isArray(tools)) {
    throw new TypeError(`${WHERE}: idempotentTools(tools, options) takes an array of tool() definitions (or what createSdkMcpServer returned), not ${describe(tools)}`);
  }
  const list = tools as readonly SdkToolLike[];
  list.forEach((t, i) => {
    if (t === null || typeof t !== 'object' || typeof t.name !== 'string' || typeof t.handler !== 'function') {
      throw new TypeError(`${WHERE}: idempotentTools(): tools[${i}] is not a tool() definition (an object with a name and a handler)`);
    }
  });
  const optionsOf = toolSetOptions<ClaudeToolOptions<any>>(WHERE, list.map((t) => t.name), options);
  return list.map((t) => {
    const own = optionsOf(t.name);
    if (own === undefined) return t;
    const { name: _name, ...rest } = own;
    return copyTool(t, { handler: wrapHandler(t.name, t.handler, rest) });
  }) as unknown as T;
}

/** What `createSdkMcpServer` returns: `{ type: 'sdk', name, instance }` (an MCP SDK McpServer). */
export interface SdkServerConfigLike {
  type: 'sdk';
  name: string;
  instance: object;
}

function isSdkServerConfig(value: unknown): value is SdkServerConfigLike {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && (value as { type?: unknown }).type === 'sdk' && typeof (value as { instance?: unknown }).instance === 'object';
}

const GUARDED = Symbol('idempotent-tools/claude-agent-sdk');

/** Guards, in place, the tools registered on a `createSdkMcpServer` server. */
function guardSdkServer(config: SdkServerConfigLike, options: ClaudeToolSetOptions): void {
  const registered = (config.instance as { _registeredTools?: unknown })._registeredTools as Record<string, { handler?: unknown }> | undefined;
  if (registered === null || typeof registered !== 'object') {
    throw new TypeError(`${WHERE}: the server "${config.name}" does not list its tools as this helper expects (@modelcontextprotocol/sdk 1.x); pass its tool() definitions to idempotentTools() before createSdkMcpServer instead.`);
  }
  const optionsOf = toolSetOptions<ClaudeToolOptions<any>>(WHERE, Object.keys(registered), options);
  for (const [name, tool] of Object.entries(registered)) {
    const own = optionsOf(name);
    const handler = tool.handler as ((args: unknown, extra: ClaudeToolExtraLike) => unknown) & { [GUARDED]?: true };
    if (own === undefined || typeof handler !== 'function' || handler[GUARDED]) continue;
    const { name: _name, ...rest } = own;
    const guarded = wrapHandler(name, handler, rest);
    Object.defineProperty(guarded, GUARDED, { value: true });
    tool.handler = guarded;
  }
}

// ---------------------------------------------------------------------------------------
// canUseTool

/** What `canUseTool` answers (the SDK's `PermissionResult`). */
export type PermissionResultLike =
  | { behavior: 'allow'; updatedInput?: Record<string, unknown>; [k: string]: unknown }
  | { behavior: 'deny'; message: string; interrupt?: boolean; [k: string]: unknown };

/** The parts of `canUseTool`'s third argument this helper reads (it passes all of it on). */
export interface CanUseToolOptionsLike {
  signal?: AbortSignal;
  toolUseID?: string;
  mcpServer?: { name: string; source?: string };
  [k: string]: unknown;
}

export type CanUseToolLike = (toolName: string, input: Record<string, unknown>, options: CanUseToolOptionsLike) => Promise<PermissionResultLike | null>;

export interface CanUseToolGuardOptions {
  store?: Store;
  /** The scope the tools were given (`idempotentTools(tools, { scope })`), as a value or a function of the ask. Default: the tools' default. */
  scope?: Json | ((toolName: string, input: Record<string, unknown>, options: CanUseToolOptionsLike) => Json | undefined);
  /** Forget a decision this long after it was made. Default: never. */
  ttlMs?: number;
}

/** The state of one ask, passed to the one function the core wraps (the user's callback travels in it). */
interface Ask {
  canUseTool: CanUseToolLike;
  options: CanUseToolOptionsLike;
  asked: boolean;
}

/** The one function every guarded `canUseTool` runs inside its record: asks the user's callback. */
async function askOnce(_toolName: string, _input: unknown, ask: Ask): Promise<PermissionResultLike | null> {
  ask.asked = true;
  const [toolName, input] = [_toolName, _input as Record<string, unknown>];
  return ask.canUseTool(toolName, input, ask.options);
}

/** `mcp__pay__send_payment` → `send_payment` (the name the tool's handler is keyed by). */
function bareToolName(toolName: string, server: string | undefined): string {
  if (server !== undefined && toolName.startsWith(`mcp__${server}__`)) return toolName.slice(`mcp__${server}__`.length);
  const m = /^mcp__[^_]+(?:_[^_]+)*?__(.+)$/.exec(toolName);
  return m === null ? toolName : m[1];
}

function decisionOf(answer: PermissionResultLike, input: Record<string, unknown>): { decision: 'approve' | 'edit' | 'reject'; args: unknown; reason?: string } {
  if (answer.behavior === 'deny') return { decision: 'reject', args: input, reason: typeof answer.message === 'string' ? answer.message : undefined };
  const edited = answer.updatedInput;
  if (edited === undefined || edited === null) return { decision: 'approve', args: input };
  let same = false;
  try {
    same = canonicalJson(edited) === canonicalJson(input);
  } catch {
    same = false;
  }
  return same ? { decision: 'approve', args: input } : { decision: 'edit', args: edited };
}

/**
 * Wraps `canUseTool` so that a decision is made once per tool call: the first answer for a
 * tool_use id (allow, allow with `updatedInput`, deny) is recorded, and every later ask for
 * that id (a resumed or forked session that re-sends the call, a second worker, a double
 * submit) gets the same answer without asking again; an ask while the first is still
 * waiting for its human waits for that answer. The decision is also recorded as the call's
 * approval (docs/approvals.md), so a guarded tool runs only with the approved (or edited)
 * input, and a denied call never runs. A callback that throws decides nothing: the next ask asks again.
 */
export function idempotentCanUseTool<F extends (toolName: string, input: Record<string, unknown>, options: any) => Promise<any>>(canUseTool: F, options: CanUseToolGuardOptions = {}): F {
  if (typeof canUseTool !== 'function') throw new TypeError(`${WHERE}: idempotentCanUseTool(canUseTool, options) takes your canUseTool function, not ${describe(canUseTool)}`);
  if (options === null || typeof options !== 'object') throw new TypeError(`${WHERE}: idempotentCanUseTool(): options must be an object`);
  for (const k of Object.keys(options)) {
    if (!['store', 'scope', 'ttlMs'].includes(k)) throw new TypeError(`${WHERE}: idempotentCanUseTool(): "${k}" is not an option; the options are store, scope, ttlMs`);
  }
  const { scope, ttlMs } = options;
  if (scope !== undefined && typeof scope !== 'function') scopeValue(scope, [], SCOPE_HINT);
  const decideOptions: WaitingOptions<[string, unknown, Ask]> = {
    name: 'claude-agent-sdk:canUseTool',
    ...(options.store === undefined ? {} : { store: options.store }),
    ...(ttlMs === undefined ? {} : { ttlMs }),
    onDuplicate: 'block',
    // A human may take long: the claim is renewed while the callback waits.
    payload: (toolName, input) => ({ toolName, input: input === undefined ? null : input }),
    meta: (_toolName, _input, ask) => ({ framework: 'claude-agent-sdk', toolCallId: ask.options.toolUseID ?? '' }),
    // An ask waiting for the same call's first ask stops when the runtime gives it up.
    [WAIT_SIGNAL]: (_toolName, _input, ask) => ask.options?.signal,
  };
  const decide = idempotent(askOnce, decideOptions);
  const guarded: CanUseToolLike = async function guardedCanUseTool(toolName, input, askOptions) {
    const toolUseId = idOf(askOptions?.toolUseID);
    // Nothing to bind the answer to: no id, or a numbered one (a later call would be taken for this one).
    if (toolUseId === undefined || isNumberedCallId(toolUseId)) return canUseTool(toolName, input, askOptions);
    const conversation = scopeValue(scope, [toolName, input, askOptions], SCOPE_HINT, { toolUseId, businessKey: false, tool: toolName });
    const digest = createHash('sha256').update(canonicalJson({ scope: conversation })).digest('hex').slice(0, 32);
    const key = `permission|${toolName}|${toolUseId}|${digest}`;
    const ask: Ask = { canUseTool: canUseTool as unknown as CanUseToolLike, options: askOptions, asked: false };
    let answer: PermissionResultLike | null;
    for (;;) {
      try {
        answer = await decide.withKey(key)(toolName, input, ask);
        break;
      } catch (err) {
        const code = (err as { code?: unknown } | null)?.code;
        // Still waiting for its human, past pollTimeoutMs: keep waiting, unless this ask was given up.
        if (code === 'IN_FLIGHT_TIMEOUT' && askOptions?.signal?.aborted !== true) continue;
        if (code === 'KEY_MISMATCH') {
          return { behavior: 'deny', message: `idempotent-tools: tool call ${toolUseId} of ${toolName} was already decided for other input; this one is not run.` };
        }
        throw err;
      }
    }
    if (answer === null || answer === undefined || typeof answer !== 'object') return answer;
    // Recorded as the call's approval, so the guarded tool runs only as decided.
    const { decision, args, reason } = decisionOf(answer, input);
    const reported: ReportedDecision = { toolCallId: toolUseId, toolName: bareToolName(toolName, askOptions?.mcpServer?.name), args, decision, turn: null, ...(reason === undefined ? {} : { reason }) };
    await recordReported(options.store ?? defaultStore(), conversation, [reported], {
      source: 'claude-agent-sdk',
      ttlMs,
      meta: (id) => ({ framework: 'claude-agent-sdk', toolCallId: id, scope: scopeLabel({ conversation }) }),
      emit: () => {},
    });
    return answer;
  };
  return guarded as unknown as F;
}

// ---------------------------------------------------------------------------------------
// options.mcpServers

export interface McpServersGuardOptions extends ClaudeToolSetOptions {
  /**
   * The proxy's store for external servers: `db` a SQLite file (`--db`); `redis`, `postgres` a
   * URL, handed to the proxy in its environment, never on its command line (a password there
   * is readable by every local user). Default: the environment's (`IDEMPOTENT_TOOLS_*`), else
   * the default SQLite file.
   */
  db?: string;
  redis?: string;
  postgres?: string;
  /**
   * How long the proxy keeps a call for its retries (`--window`, default `"1d"`). Each call is
   * its tool_use id, so a repeat within it is a re-sent call, not a new one with the same arguments.
   */
  window?: string;
  /** The proxy's config file (`--config`: per-tool rules, `keyPath` business keys). */
  config?: string;
}

/**
 * The proxy command, as this package installs it: paths and durations only. What may be
 * secret (a store URL's password, an HTTP server's URL and headers) goes in its environment
 * (`proxyEnv`): every local user reads a process's arguments (`ps`), only its owner its
 * environment.
 */
function proxyArgs(o: McpServersGuardOptions): string[] {
  const cli = join(__dirname, '..', 'cli.js');
  const flags: string[] = [cli, 'mcp'];
  for (const f of ['db', 'config'] as const) if (o[f] !== undefined) flags.push(`--${f}`, String(o[f]));
  flags.push('--window', o.window ?? '1d', '--tool-call-id');
  return flags;
}

/** The proxy's store, in its own variables (the proxy keeps them from the server it runs). */
function proxyEnv(o: McpServersGuardOptions): Record<string, string> {
  if (o.redis !== undefined) return { [MCP_REDIS_URL]: String(o.redis), [MCP_POSTGRES_URL]: '' };
  if (o.postgres !== undefined) return { [MCP_POSTGRES_URL]: String(o.postgres), [MCP_REDIS_URL]: '' };
  return {};
}

/** A server's own `env` (a record of strings), with the proxy's variables over it. */
function envWith(own: unknown, proxy: Record<string, string>): Record<string, string> | undefined {
  const base = own !== null && typeof own === 'object' && !Array.isArray(own) ? (own as Record<string, string>) : undefined;
  if (Object.keys(proxy).length === 0) return base;
  return { ...(base ?? {}), ...proxy };
}

/**
 * `options.mcpServers` with every server guarded: in-process servers (`createSdkMcpServer`)
 * have their tools guarded as `idempotentTools` guards them; external stdio and Streamable
 * HTTP servers run behind the proxy (`idempotent-tools mcp --tool-call-id`), which keys each
 * call by the tool_use id the runtime sends in `_meta` (so a re-sent call replays, and two
 * calls with the same arguments are two calls). Other server kinds (SSE) are left as they are.
 */
export function idempotentMcpServers<T extends Record<string, unknown>>(mcpServers: T, options: McpServersGuardOptions = {}): T {
  if (mcpServers === null || typeof mcpServers !== 'object' || Array.isArray(mcpServers)) {
    throw new TypeError(`${WHERE}: idempotentMcpServers(mcpServers) takes query()'s options.mcpServers (an object of servers by name), not ${describe(mcpServers)}`);
  }
  const { db, redis, postgres, window, config, ...toolOptions } = options;
  const stores = Object.entries({ db, redis, postgres }).filter(([, v]) => v !== undefined).map(([k]) => `"${k}"`);
  if (stores.length > 1) throw new TypeError(`${WHERE}: idempotentMcpServers(): give one store ("db", "redis" or "postgres"), not ${stores.join(' and ')}`);
  const proxy = proxyArgs({ db, window, config });
  // Who the external servers' calls belong to: the proxy keys them under it (a value: the
  // proxy runs per query() and never sees a call's input before it keys it).
  const { scope } = toolOptions;
  if (typeof scope === 'function') {
    throw new TypeError(`${WHERE}: idempotentMcpServers(): "scope" must be a value (the conversation's or user's id, as you build this query's options), not a function: the proxy that guards an external server keys every call of this query under it`);
  }
  const store = { ...proxyEnv({ redis, postgres }), ...(scope === undefined ? {} : { [MCP_SCOPE]: canonicalJson(scope) }) };
  const out: Record<string, unknown> = {};
  for (const [name, server] of Object.entries(mcpServers)) {
    const s = server as { type?: unknown; command?: unknown; args?: unknown; env?: unknown; url?: unknown; headers?: unknown };
    if (isSdkServerConfig(server)) {
      guardSdkServer(server, toolOptions);
      out[name] = server;
    } else if ((s.type === undefined || s.type === 'stdio') && typeof s.command === 'string') {
      const args = Array.isArray(s.args) ? (s.args as string[]) : [];
      const env = envWith(s.env, store);
      out[name] = { ...s, type: 'stdio', command: process.execPath, args: [...proxy, '--', s.command, ...args], ...(env === undefined ? {} : { env }) };
    } else if (s.type === 'http' && typeof s.url === 'string') {
      const headers = s.headers !== null && typeof s.headers === 'object' ? (s.headers as Record<string, string>) : {};
      const { url: _url, headers: _headers, ...others } = s;
      // The URL (a token in its query) and the headers (a bearer token) too: the proxy's environment, not its arguments.
      const env = envWith(undefined, { ...store, [MCP_URL]: s.url, ...(Object.keys(headers).length === 0 ? {} : { [MCP_HEADERS]: JSON.stringify(headers) }) });
      out[name] = { ...others, type: 'stdio', command: process.execPath, args: proxy, env };
    } else out[name] = server;
  }
  return out as T;
}
