/**
 * What the framework helpers share: one wrapper around `idempotent()` that keys a tool
 * call by (scope, tool call id, input), never by the framework's context object, and
 * tells the caller whether a result was replayed. No framework is imported here.
 */

import { AsyncLocalStorage } from 'node:async_hooks';

import type { IdempotencyEvent } from '../events.js';
import { idempotent } from '../idempotent.js';
import type { IdempotentOptions } from '../options.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** What a helper knows about the tool call it wrapped. */
export interface ToolCallInfo {
  /** Which helper made the call: 'langgraph', 'ai-sdk', 'openai-agents' or 'mastra'. */
  framework: string;
  /** The framework's id of this tool call. */
  toolCallId: string;
  /** The scope the key was derived with (thread, conversation, run). */
  scope: Json;
}

/** A core event, plus which framework tool call it belongs to. */
export type ToolCallEvent = IdempotencyEvent & ToolCallInfo;

/** How a call ended: `replayed` is true when the stored result was returned and the tool did not run. */
export interface ToolCallOutcome extends ToolCallInfo {
  key: string;
  replayed: boolean;
}

/** The options every helper takes: `idempotent()`'s, except the ones the helper sets itself. */
export interface ToolHelperOptions<I, R>
  extends Omit<IdempotentOptions, 'key' | 'context' | 'payload' | 'onEvent'> {
  // `onDuplicate` defaults to 'block' here (the core's default is 'raise'): a re-run of a
  // tool call whose first run is still in flight waits for, and returns, that run's result.
  /**
   * The part of the input that identifies the call (default: the whole input). It is hashed
   * into the key and fingerprinted, so two calls with the same id but other input never share
   * a result.
   */
  payload?: (input: I) => unknown;
  /** Every outcome of every call (executed, replayed, failed, ...), with the tool call's id and scope. */
  onEvent?: (event: ToolCallEvent) => void;
  /**
   * Called with each result before the framework sees it; what it returns is what the
   * framework (and the model) gets. Use it to tell the agent that a result was replayed:
   * `annotate: (result, { replayed }) => (replayed ? { ...result, replayed: true } : result)`.
   */
  annotate?: (result: Awaited<R>, outcome: ToolCallOutcome) => unknown;
}

const current = new AsyncLocalStorage<ToolCallInfo>();

interface CallState {
  ran: boolean;
}

/**
 * Wraps `fn(input, ...rest)`. `identify(input, ...rest)` names the tool call (throwing a
 * TypeError when the framework context is missing); the key is SHA-256 over the name,
 * `{ scope, toolCallId }` and the canonical JSON of `payload(input)`. The rest of the
 * arguments (the framework's context objects) never take part in the key.
 * @internal
 */
export function wrapToolCall<I, Rest extends unknown[], R>(
  framework: string,
  fn: (input: I, ...rest: Rest) => R,
  options: ToolHelperOptions<I, R> | undefined,
  identify: (input: I, rest: Rest) => ToolCallInfo,
): (input: I, ...rest: Rest) => Promise<unknown> {
  if (typeof fn !== 'function') {
    throw new TypeError(`idempotent-tools/${framework}: the tool function must be a function, not ${fn === null ? 'null' : typeof fn}`);
  }
  const { payload, onEvent, annotate, ...rest } = options ?? {};
  for (const [option, value] of Object.entries({ payload, onEvent, annotate })) {
    if (value !== undefined && typeof value !== 'function') {
      throw new TypeError(`idempotent-tools/${framework}: option "${option}" must be a function, not ${value === null ? 'null' : typeof value}`);
    }
  }
  type Args = [I, ToolCallInfo, CallState, Rest];
  const pick = payload ?? ((input: I) => (input === undefined ? null : input));
  const inner = (input: I, _info: ToolCallInfo, state: CallState, frameworkArgs: Rest) => {
    state.ran = true;
    return fn(input, ...frameworkArgs);
  };
  Object.defineProperty(inner, 'name', { value: fn.name });
  const wrapped = idempotent<Args, R>(inner, {
    // A framework that re-runs a tool call while the first run is still going (a sibling
    // tool interrupted the step, a double-submitted resume) should get its result, not an error.
    ...rest,
    onDuplicate: rest.onDuplicate ?? 'block',
    context: (_input, info) => ({ scope: info.scope, toolCallId: info.toolCallId }),
    payload: (input) => pick(input),
    onEvent: onEvent && ((event) => {
      const info = current.getStore();
      onEvent(info === undefined ? (event as ToolCallEvent) : { ...event, ...info });
    }),
  });
  return async (input: I, ...frameworkArgs: Rest) => {
    const info = identify(input, frameworkArgs);
    const state: CallState = { ran: false };
    const args: Args = [input, info, state, frameworkArgs];
    const result = await current.run(info, () => wrapped(...args));
    if (annotate === undefined) return result;
    return annotate(result, { ...info, key: wrapped.keyFor(...args), replayed: !state.ran });
  };
}

/** `value` as a non-empty string id, or undefined. */
export function idOf(value: unknown): string | undefined {
  if (typeof value === 'string' && value.length > 0) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') return value === '' ? 'an empty string' : JSON.stringify(value);
  return typeof value;
}

/** A scope option: a JSON value, or a function of the call that returns one. */
export type Scope<Call extends unknown[]> = Json | ((...call: Call) => Json | undefined);

/** Resolves a required scope; a missing one is a TypeError that says what to pass. */
export function resolveScope<Call extends unknown[]>(
  framework: string,
  scope: Scope<Call> | undefined,
  call: Call,
  hint: string,
): Json {
  const value = typeof scope === 'function' ? scope(...call) : scope;
  if (value === undefined || value === null || value === '') {
    throw new TypeError(
      `idempotent-tools/${framework}: ${typeof scope === 'function' ? 'the "scope" option returned ' + describe(value) : 'the "scope" option is missing'}. ` +
        `Tool call ids are only unique within one conversation or run, so the key needs a scope: ${hint}`,
    );
  }
  return value;
}
