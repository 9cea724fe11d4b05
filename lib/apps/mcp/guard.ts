/**
 * The retry guard on `tools/call`: one `idempotent()` wrapper per tool, whose function
 * forwards the call to the upstream server. A repeat within the window (or under the same
 * client-sent idempotency key, in `_meta` or at the config's `keyPath` in the arguments, read
 * by the library's `mcp-call.ts`, as `idempotent-tools/mcp-server` reads it) gets the first
 * call's stored `CallToolResult` back.
 * Built on the package's public API only.
 */

import { createHash } from 'node:crypto';

import type { ToolPolicy } from './policy.js';
import { BadCall, type CallParams, REPLAYED, WAIT_SIGNAL, type WaitingOptions, clientKey, idempotent, isNumberedCallId, keyInArguments, toolCallIdOf, withClientKey, type IdempotentFunction, type Store } from '../library.js';

export type CallToolResult = Record<string, unknown> & { isError?: boolean; _meta?: Record<string, unknown> };

/** Where replays are marked in the result's `_meta` (lib/integrations/mcp-call.ts). */
export { BadCall, type CallParams, REPLAYED } from '../library.js';

/** A tool's `isError: true` result under `isError: 'rerun'`: thrown so that the record
 * is `failed` (the next call runs again), caught again to hand the result back. */
class ToolErrorResult extends Error {
  constructor(readonly result: CallToolResult) {
    super(errorText(result));
    this.name = 'ToolError';
  }
}

function errorText(result: CallToolResult): string {
  const content = Array.isArray(result.content) ? result.content : [];
  const text = content.find((c): c is { type: 'text'; text: string } => c?.type === 'text' && typeof c.text === 'string');
  return (text?.text ?? 'the tool returned isError: true').slice(0, 500);
}

/**
 * The call went to the server and its answer can no longer be learned: its cancel was
 * forwarded (the SDK's servers never answer a cancelled request), or the answer was lost
 * on the way. Named `AbortError` because that is the package's documented sign of an
 * abort after the function started: the record stays pending, as after a crash, and a
 * retry runs again only once the lease has run out. Never `failed`: it may have happened.
 */
export class OutcomeUnknown extends Error {
  override readonly name = 'AbortError';
}

/** One call's way to the upstream server, and whether it was taken. */
interface Invocation {
  run: () => Promise<CallToolResult>;
  ran: boolean;
  /** The client's tool call id, when the policy makes it part of the call's identity. */
  toolCallId?: string;
  /** Fires when the client cancels this request or leaves: a wait for the same call in flight ends. */
  waitSignal?: AbortSignal;
}

export type Outcome = 'executed' | 'replayed' | 'failed';

export interface GuardedResult {
  result: CallToolResult;
  outcome: Outcome;
  key: string;
}

export interface Server {
  /** What identifies the upstream server in keys: a digest of its configuration (identity.ts), or the config's `server`. */
  id: string;
  /** Its name in records: `<label>/<tool>`. */
  label: string;
}

type Wrapped = IdempotentFunction<[Record<string, unknown>, Invocation], CallToolResult>;

export class RetryGuard {
  private readonly wrappers = new Map<string, Wrapped>();

  constructor(
    private readonly store: Store,
    private readonly server: () => Server,
    /** Told when a call finds its key in flight and waits (for `--log`), with the key's keyed id. */
    private readonly onWait?: (name: string, keyId: string) => void,
  ) {}

  private wrapperFor(tool: string, policy: ToolPolicy): Wrapped {
    const id = `${tool}\0${policy.windowMs}\0${policy.onDuplicate}\0${policy.errorResults}\0${policy.waitMs}\0${policy.leaseMs}`;
    let wrapped = this.wrappers.get(id);
    if (wrapped !== undefined) return wrapped;
    const server = this.server();
    const name = `${server.label}/${tool}`;
    const rerunErrors = policy.errorResults === 'rerun';
    const options: WaitingOptions<[Record<string, unknown>, Invocation]> = {
      name,
      store: this.store,
      // A retry guard, not a cache: after the window the same call is new work.
      ttlMs: policy.windowMs,
      onDuplicate: policy.onDuplicate,
      pollTimeoutMs: policy.waitMs,
      leaseMs: policy.leaseMs,
      // The arguments identify the call; the invocation (how to reach upstream) does not.
      payload: (args) => args,
      // With --tool-call-id, the client's tool call id too: a re-sent call is the same one,
      // two calls with the same arguments are two (keys without one are as before).
      context: (_args, invocation) =>
        invocation.toolCallId === undefined ? { mcpServer: server.id } : { mcpServer: server.id, toolCallId: invocation.toolCallId },
      // For `inspect` and the inspector page: which server's tool, through the proxy.
      meta: () => ({ framework: 'mcp', scope: server.label }),
      onEvent: (event) => {
        if (event.type === 'in-flight') this.onWait?.(name, event.keyId ?? event.key);
      },
      // A duplicate waiting for the same call in flight stops when its client gives it up.
      [WAIT_SIGNAL]: (_args, invocation) => invocation.waitSignal,
    };
    wrapped = idempotent(async (_args: Record<string, unknown>, invocation: Invocation): Promise<CallToolResult> => {
      invocation.ran = true;
      const result = await invocation.run();
      if (rerunErrors && result.isError === true) throw new ToolErrorResult(result);
      return result;
    }, options);
    this.wrappers.set(id, wrapped);
    return wrapped;
  }

  /** The call under the guard: executed upstream once, replayed from the store after. A
   * duplicate that waits for the same call in flight stops when `waitSignal` fires. */
  async call(params: CallParams, policy: ToolPolicy, run: () => Promise<CallToolResult>, waitSignal?: AbortSignal): Promise<GuardedResult> {
    const inArguments =
      policy.keyPath === undefined ? undefined : keyInArguments(params.arguments ?? {}, policy.keyPath);
    const explicit = clientKey(params) ?? inArguments?.key;
    const wrapped = this.wrapperFor(params.name, policy);
    const args = inArguments?.rest ?? params.arguments ?? {};
    const toolCallId = policy.toolCallId ? toolCallIdOf(params._meta) : undefined;
    // A numbered tool call id (toolu_01: a gateway that counts, restarting in every response)
    // tells no call from a later one with the same arguments: without a client's key, refused.
    if (toolCallId !== undefined && explicit === undefined && isNumberedCallId(toolCallId)) {
      throw new BadCall(
        `the tool call id ${JSON.stringify(toolCallId)} is a number its model's gateway counts (it restarts in every response), so it tells this call from no later one ` +
          "with the same arguments, and the call did not run. Send an idempotency key (params._meta.idempotencyKey, or the config's keyPath), or use a model whose tool call ids are unique.",
      );
    }
    const invocation: Invocation = { run, ran: false, waitSignal, ...(toolCallId === undefined ? {} : { toolCallId }) };
    // A client's key is scoped to this upstream server: two servers behind two proxies
    // on one store never share a client's key.
    const key = explicit === undefined ? wrapped.keyFor(args, invocation) : `mcp:${digest(this.server().id)}:${explicit}`;
    try {
      const result = explicit === undefined ? await wrapped(args, invocation) : await wrapped.withKey(key)(args, invocation);
      if (invocation.ran) return { result, outcome: 'executed', key };
      return { result: { ...result, _meta: { ...(result._meta ?? {}), [REPLAYED]: true } }, outcome: 'replayed', key };
    } catch (err) {
      if (err instanceof ToolErrorResult) return { result: err.result, outcome: 'failed', key };
      throw withClientKey(err, explicit); // a refusal names the client's key (SEP-3182's error.data)
    }
  }
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 12);
}
