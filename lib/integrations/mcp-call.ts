/**
 * How an MCP `tools/call` names itself, read one way by the MCP proxy (`idempotent-tools mcp`,
 * in front of a server) and by `idempotent-tools/mcp-server` (inside one): the client's
 * idempotency key, in every spelling clients use, and a key carried inside the arguments.
 * Imports nothing from the MCP SDK: it reads the request's params as they arrived.
 */

import { placeholderNumber } from './mcp-exact-numbers.js';

/**
 * Where clients put an idempotency key in `_meta`, in the order they are looked for: the
 * field this package documents, the names in use elsewhere (commerce bindings use
 * `idempotency-key` and `idempotency_key`), and a reverse-DNS name. After them, the
 * top-level `params.idempotencyKey` that MCP SEP-3182 proposed.
 */
export const META_KEY_FIELDS: readonly string[] = ['idempotencyKey', 'io.modelcontextprotocol/idempotency-key', 'idempotency-key', 'idempotency_key'];

/** The parts of a `tools/call` request's params that name the call. */
export interface CallParams {
  name: string;
  arguments?: Record<string, unknown>;
  idempotencyKey?: unknown;
  _meta?: Record<string, unknown>;
}

/** A `tools/call` whose idempotency key cannot be used: refused before anything runs (JSON-RPC -32602). */
export class BadCall extends Error {
  override readonly name = 'BadCall';
}

/** A key is a string, not a number (one a double cannot keep arrives at the proxy as a placeholder string). */
function isKeyString(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && placeholderNumber(value) === undefined;
}

/** A value as the client wrote it. */
function shown(value: unknown): string {
  return placeholderNumber(value) ?? JSON.stringify(value) ?? String(value);
}

/** The client's idempotency key for this call, if it sent one; a `BadCall` for one that is not a non-empty string. */
export function clientKey(params: Pick<CallParams, 'idempotencyKey' | '_meta'>): string | undefined {
  const meta = params._meta !== null && typeof params._meta === 'object' ? params._meta : undefined;
  const candidates: Array<[string, unknown]> = [
    ...META_KEY_FIELDS.map((k): [string, unknown] => [`_meta.${k}`, meta?.[k]]),
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
 * ACP `meta.idempotency_key`), at `path`: the key, and the arguments without it, which are
 * what the fingerprint covers (the key is not part of what the call does). Copies along
 * the path only; the arguments passed on are the client's own.
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

/**
 * The tool call id an agent runtime sends with a call, where one does: the Claude Agent SDK
 * and Claude Code put the model's `tool_use` id in `_meta["claudecode/toolUseId"]`.
 */
export const TOOL_CALL_ID_FIELDS: readonly string[] = ['claudecode/toolUseId'];

/** The runtime's tool call id of this call (see `TOOL_CALL_ID_FIELDS`), if it sent one. */
export function toolCallIdOf(meta: unknown): string | undefined {
  if (meta === null || typeof meta !== 'object') return undefined;
  for (const field of TOOL_CALL_ID_FIELDS) {
    const value = (meta as Record<string, unknown>)[field];
    if (typeof value === 'string' && value.length > 0) return value;
  }
  return undefined;
}

/**
 * The JSON-RPC error code of the guard's own errors (a store down, a key reused for other
 * arguments, ...), told apart by `data["idempotent-tools"]`. In JSON-RPC's
 * implementation-defined range, outside the -32020..-32099 that MCP (2026-07-28) reserves
 * for itself; it was -32050.
 */
export const GUARD_ERROR = -32010;
/** JSON-RPC's "invalid params": a call refused for what it sent, before anything ran. */
export const INVALID_PARAMS = -32602;

/** Where a replayed result is marked in its `_meta`. */
export const REPLAYED = 'idempotent-tools/replayed';

/**
 * The `error.data.type` of SEP-3182 ("Request Idempotency", modelcontextprotocol pull 3182),
 * for the package's codes it names: the same key with other arguments (or another tool), and
 * a duplicate still running that the server did not wait for (`onDuplicate: 'raise'`), or
 * stopped waiting for (`pollTimeoutMs`).
 */
const SEP_3182_TYPES: Record<string, string> = {
  KEY_MISMATCH: 'idempotency_key_conflict',
  DUPLICATE_IN_FLIGHT: 'idempotency_key_in_progress',
  IN_FLIGHT_TIMEOUT: 'idempotency_key_in_progress',
};

/** The client's idempotency key of the call each error came from (see `withClientKey`). */
const clientKeys = new WeakMap<object, string>();

/** Notes the client's idempotency key on an error its call threw, for `guardErrorOf`'s `data.idempotencyKey`. */
export function withClientKey(err: unknown, key: string | undefined): unknown {
  if (key !== undefined && err !== null && typeof err === 'object') clientKeys.set(err, key);
  return err;
}

/**
 * The JSON-RPC error that answers a call the guard refused or could not run: a bad
 * idempotency key, or an input that cannot be keyed, is invalid params (-32602); the
 * package's own errors (KeyMismatchError, StoreError, InFlightTimeoutError, ...) are
 * `GUARD_ERROR` with their code in `data["idempotent-tools"]` and the record's key, and, in
 * SEP-3182's shape, `data.type` (a conflict, a call in progress) and `data.idempotencyKey`
 * (the key as the client sent it, when it sent one).
 * Undefined for any other error (the tool's own).
 */
export function guardErrorOf(err: unknown, prefix: string): { code: number; message: string; data?: Record<string, unknown> } | undefined {
  if (err instanceof BadCall) return { code: INVALID_PARAMS, message: `${prefix}: ${err.message}` };
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && err instanceof Error) {
    const data: Record<string, unknown> = { 'idempotent-tools': code, key: (err as { key?: string }).key };
    const type = Object.hasOwn(SEP_3182_TYPES, code) ? SEP_3182_TYPES[code] : undefined;
    if (type !== undefined) {
      data.type = type;
      const given = clientKeys.get(err);
      if (given !== undefined) data.idempotencyKey = given;
    }
    return { code: GUARD_ERROR, message: err.message, data };
  }
  return undefined;
}
