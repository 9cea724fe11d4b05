/**
 * The retry guard on `tools/call`: one `idempotent()` wrapper per tool, whose function
 * forwards the call to the upstream server. A repeat within the window (or under the same
 * client-sent idempotency key, in `_meta` or at the config's `keyPath` in the arguments)
 * gets the first call's stored `CallToolResult` back.
 * Built on the package's public API only.
 */

import { createHash } from 'node:crypto';

import { placeholderNumber } from './exact-numbers.js';
import type { ToolPolicy } from './policy.js';
import { idempotent, type IdempotentFunction, type Store } from '../library.js';

export type CallToolResult = Record<string, unknown> & { isError?: boolean; _meta?: Record<string, unknown> };

/** Where replays are marked in the result's `_meta`. */
export const REPLAYED = 'idempotent-tools/replayed';

/**
 * Where clients put an idempotency key, in the order they are looked for: the `_meta`
 * field this package documents, the names in use elsewhere (MCP SEP-3182 proposes a
 * top-level `idempotencyKey` param; commerce bindings use `idempotency-key` and
 * `idempotency_key` in `_meta`), and a reverse-DNS `_meta` name.
 */
const META_KEYS = ['idempotencyKey', 'io.modelcontextprotocol/idempotency-key', 'idempotency-key', 'idempotency_key'];

export interface CallParams {
  name: string;
  arguments?: Record<string, unknown>;
  idempotencyKey?: unknown;
  _meta?: Record<string, unknown>;
}

/** A bad `tools/call` (an unusable idempotency key): refused before anything runs. */
export class BadCall extends Error {}

/** A key is a string, not a number (one a double cannot keep arrives as a placeholder string). */
function isKeyString(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && placeholderNumber(value) === undefined;
}

/** A value as the client wrote it. */
function shown(value: unknown): string {
  return placeholderNumber(value) ?? JSON.stringify(value);
}

/** The client's idempotency key for this call, if it sent one. */
export function clientKey(params: CallParams): string | undefined {
  const candidates: Array<[string, unknown]> = [
    ...META_KEYS.map((k): [string, unknown] => [`_meta.${k}`, params._meta?.[k]]),
    ['idempotencyKey', params.idempotencyKey],
  ];
  for (const [where, value] of candidates) {
    if (value === undefined || value === null) continue;
    if (!isKeyString(value)) {
      throw new BadCall(`params.${where} must be a non-empty string (the call's idempotency key), not ${shown(value)}`);
    }
    return value;
  }
  return undefined;
}

/** `arguments.meta["idempotency-key"]`, for messages. */
function pathText(path: string[]): string {
  return `arguments${path.map((p) => (/^[A-Za-z_$][\w$]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`)).join('')}`;
}

/**
 * A key carried inside the arguments (commerce protocols: UCP `meta["idempotency-key"]`,
 * ACP `meta.idempotency_key`), at the config's `keyPath`: the key, and the arguments
 * without it, which are what the fingerprint covers (the key is not part of what the call
 * does). Copies along the path only; the arguments forwarded are the client's own.
 */
export function keyInArguments(
  args: Record<string, unknown>,
  path: string[],
): { key: string | undefined; rest: Record<string, unknown> } {
  const parents: Array<Record<string, unknown>> = [];
  let node: unknown = args;
  for (const p of path) {
    if (node === null || typeof node !== 'object' || Array.isArray(node) || !Object.hasOwn(node, p)) return { key: undefined, rest: args };
    parents.push(node as Record<string, unknown>);
    node = (node as Record<string, unknown>)[p];
  }
  if (node === undefined || node === null) return { key: undefined, rest: args };
  if (!isKeyString(node)) {
    throw new BadCall(`${pathText(path)} must be a non-empty string (the call's idempotency key, by the config's keyPath), not ${shown(node)}`);
  }
  // Rebuild the path's objects without the key, from the innermost out.
  let rest: Record<string, unknown> | undefined;
  for (let i = parents.length - 1; i >= 0; i--) {
    const copy = { ...parents[i] };
    if (rest === undefined) delete copy[path[i]];
    else copy[path[i]] = rest;
    rest = copy;
  }
  return { key: node, rest: rest! };
}

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
    wrapped = idempotent(
      async (_args: Record<string, unknown>, invocation: Invocation): Promise<CallToolResult> => {
        invocation.ran = true;
        const result = await invocation.run();
        if (rerunErrors && result.isError === true) throw new ToolErrorResult(result);
        return result;
      },
      {
        name,
        store: this.store,
        // A retry guard, not a cache: after the window the same call is new work.
        ttlMs: policy.windowMs,
        onDuplicate: policy.onDuplicate,
        pollTimeoutMs: policy.waitMs,
        leaseMs: policy.leaseMs,
        // The arguments identify the call; the invocation (how to reach upstream) does not.
        payload: (args) => args,
        context: () => ({ mcpServer: server.id }),
        // For `inspect` and the inspector page: which server's tool, through the proxy.
        meta: () => ({ framework: 'mcp', scope: server.label }),
        onEvent: (event) => {
          if (event.type === 'in-flight') this.onWait?.(name, event.keyId ?? event.key);
        },
      },
    );
    this.wrappers.set(id, wrapped);
    return wrapped;
  }

  /** The call under the guard: executed upstream once, replayed from the store after. */
  async call(params: CallParams, policy: ToolPolicy, run: () => Promise<CallToolResult>): Promise<GuardedResult> {
    const inArguments =
      policy.keyPath === undefined ? undefined : keyInArguments(params.arguments ?? {}, policy.keyPath);
    const explicit = clientKey(params) ?? inArguments?.key;
    const wrapped = this.wrapperFor(params.name, policy);
    const args = inArguments?.rest ?? params.arguments ?? {};
    const invocation: Invocation = { run, ran: false };
    // A client's key is scoped to this upstream server: two servers behind two proxies
    // on one store never share a client's key.
    const key = explicit === undefined ? wrapped.keyFor(args, invocation) : `mcp:${digest(this.server().id)}:${explicit}`;
    try {
      const result = explicit === undefined ? await wrapped(args, invocation) : await wrapped.withKey(key)(args, invocation);
      if (invocation.ran) return { result, outcome: 'executed', key };
      return { result: { ...result, _meta: { ...(result._meta ?? {}), [REPLAYED]: true } }, outcome: 'replayed', key };
    } catch (err) {
      if (err instanceof ToolErrorResult) return { result: err.result, outcome: 'failed', key };
      throw err;
    }
  }
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 12);
}
