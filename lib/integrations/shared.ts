/**
 * What the framework helpers share: one wrapper around `idempotent()` that keys a tool
 * call by (scope, tool call id, input), never by the framework's context object, and
 * tells the caller whether a result was replayed. No framework is imported here.
 *
 * What every helper guarantees (the README's framework section says the same):
 * - "Still running" is never an error: a re-run of a tool call whose first run is still in
 *   flight waits for its result as long as the first run's owner holds its lease, and
 *   takes the call over when the owner died (`onDuplicate: 'raise'` is refused).
 * - A generator tool (AI SDK preliminary results, LangChain streamed tools) runs inside
 *   its record: it is drained, and its final value is stored and returned.
 * - A configuration error (no thread id, no scope, an input that is not JSON) is a
 *   TypeError for the framework, and also a process warning, once per tool, for the developer.
 * - `fn`'s name is the wrapper's name, and `this` is passed through as the framework binds it.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';

import { running } from '../core/call-context.js';
import { Unencodable, canonicalJson, withToJsonApplied } from '../core/canonical.js';
import { defaultStore } from '../core/default-store.js';
import { ToolSuspended, markAborted } from '../core/control-flow.js';
import { approvalArgsFingerprint } from '../core/approvals.js';
// The environment's choice of default store, registered with core/ as it loads: a helper
// made without `store` (and recordApproval) may be the first thing an application imports.
import '../stores/default-store.js';
import { KeyMismatchError } from '../core/errors.js';
import { type IdempotencyEvent, publish } from '../core/events.js';
import { type IdempotentFunction, idempotent } from '../core/idempotent.js';
import { type IdempotentOptions, WAIT_SIGNAL, resolveOptions } from '../core/options.js';
import { stepOfRunningCall } from '../core/step.js';
import type { RecordMeta, Store } from '../core/store.js';
import { ApprovalRefusal, type Refusal, type ReportedDecision, checkApproval } from './approval-guard.js';
import { CannotTellError, type Json } from './identity.js';

export type { Json } from './identity.js';

/** What a helper knows about the tool call it wrapped. */
export interface ToolCallInfo {
  /** Which helper made the call: 'langgraph', 'ai-sdk', 'openai-agents' or 'mastra'. */
  framework: string;
  /** The framework's id of this tool call. */
  toolCallId: string;
  /** The scope the key was derived with (thread, conversation, run, and the turn when known). */
  scope: Json;
}

/** What a helper's `identify` finds out about a call, beyond the key's parts. @internal */
export interface CallSite extends ToolCallInfo {
  /** The tool's name as the framework gave it (used when `fn` is anonymous). */
  toolName?: string;
  /** The framework's abort signal for this call: an error thrown after it fired is an abort. */
  signal?: unknown;
  /**
   * The scope a business key (the `key` option) lives in: the conversation without the
   * turn or message parts (a model that calls again does so in a later turn). Default: `scope`.
   */
  conversation?: Json;
  /** The conversation as `recordApproval` takes it (the thread id, the `scope` option's value). Default: `conversation`. */
  approvalScope?: Json;
  /** The framework's id of the call's turn, for approvals (AI message id, approvalId, output item id, run id). Default: none. */
  turn?: string | null;
  /**
   * Why nothing tells this call from another with the same id (the framework's ids repeat
   * and the call carries no turn): the call is refused unless a business key names it.
   */
  turnUnknown?: CannotTellError;
  /** Why a stored result under this call's key may not be this call's own (identity.ts, `ambiguousReplayOf`), or undefined: then the call is refused. */
  ambiguousReplay?: ((input: unknown, stored: unknown) => string | undefined) | undefined;
}

/** A core event, plus which framework tool call it belongs to. */
export type ToolCallEvent = IdempotencyEvent & ToolCallInfo;

/** How a call ended: `replayed` is true when the stored result was returned and the tool did not run. */
export interface ToolCallOutcome extends ToolCallInfo {
  key: string;
  replayed: boolean;
}

/** What `reconcile` is asked: the tool's own input and arguments, and which tool call it was. */
export interface ToolReconcileRequest<I> {
  key: string;
  name: string;
  attempts: number;
  /** The tool's input, as the framework passed it. */
  input: I;
  /** All of the tool's arguments, as the framework passed them (input first). */
  args: unknown[];
  toolCall: ToolCallInfo;
}

export type ToolReconcileAnswer<R> = { happened: true; result: Awaited<R> } | { happened: false };

/** The options every helper takes: `idempotent()`'s, except the ones the helper sets itself. */
export interface ToolHelperOptions<I, R>
  extends Omit<IdempotentOptions, 'key' | 'context' | 'payload' | 'onEvent' | 'onDuplicate' | 'reconcile' | 'meta' | 'preview'> {
  /**
   * A business key: `(input) => string`, e.g. `(input) => `order-${input.orderId}``. Within
   * the call's conversation (thread, chat, run), the call is then that key, whatever its
   * tool call id: a model that calls the tool again under a new id (after an error, a
   * timeout, a re-plan) gets the first call's result, or joins it while it still runs.
   * The same key with other input is a KeyMismatchError (the model sees it as a tool error).
   */
  key?: (input: I) => string;
  /**
   * What a re-run does while the first run of the same tool call is still in flight:
   * `'block'` (the default) waits for its result, for as long as its owner holds the lease;
   * `'retry'` runs again at once. (`'raise'` is refused: the model would see an error.)
   */
  onDuplicate?: 'block' | 'retry';
  /**
   * The part of the input that identifies the call (default: the whole input). It is hashed
   * into the key and fingerprinted, so two calls with the same id but other input never share
   * a result. Use it when the input holds something that is not JSON (a BigInt, a Set).
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
  /**
   * Asked before the tool runs again on a call whose earlier run's owner died (its lease
   * ran out): did the side effect happen? Look it up downstream (by the key, which
   * `currentKey()` gave the earlier run). `{ happened: true, result }` records and returns
   * `result`; `{ happened: false }` runs the tool.
   */
  reconcile?: (request: ToolReconcileRequest<I>) => ToolReconcileAnswer<R> | Promise<ToolReconcileAnswer<R>>;
}

/** How a helper's framework treats a generator tool's values. @internal */
export type GeneratorResult = 'return-value' | 'last-yield';

/** What a helper tells `wrapToolCall` about its framework. @internal */
export interface Framework<I, Rest extends unknown[]> {
  name: string;
  /** Names the tool call; throws a TypeError when the framework context is missing. (It may look in the store: OpenAI Agents' turn of a model without response ids.) */
  identify: (input: I, rest: Rest, tool: ToolIdentity) => CallSite | Promise<CallSite>;
  /** The final value of a generator tool: its return value (LangChain) or its last yield (AI SDK). */
  generator: GeneratorResult;
  /** Whether the framework tells the tool its name at call time (then an anonymous `fn` is fine). */
  carriesToolName: boolean;
  /** Turns a stored result back into what the framework expects (LangGraph: Command, messages). */
  revive?: (result: unknown) => unknown;
  /** Turns a result into storable JSON data (LangGraph: a Command). */
  toStorable?: (result: unknown) => unknown;
  /**
   * Whether what the tool returned is the framework's rendering of a failure (OpenAI
   * Agents turns a throw into an error string): returns the error message, and the call
   * is recorded as failed (it runs again next time) while the framework gets the value.
   */
  failedOutput?: (result: unknown) => string | undefined;
  /** The tool's name from the framework's arguments, for error messages (when `fn` is anonymous). */
  toolNameOf?: (input: I, rest: Rest) => string | undefined;
  /**
   * A call whose framework context belongs to an enclosing tool call (a nested
   * `tool.invoke(args, config)`): returns that call's id; the call runs as a step of the
   * enclosing wrapped call.
   */
  nested?: (input: I, rest: Rest, tool: ToolIdentity) => string | undefined;
  /**
   * The framework arguments `fn` gets, with the framework's suspend function (if any)
   * wrapped to call `suspended()` first: a run that suspended itself is not a completion.
   */
  prepare?: (rest: Rest, suspended: () => void) => Rest;
  /** How the framework reports approval decisions, and how a call that may not run is answered (approval-guard.ts). */
  approvals?: FrameworkApprovals<I, Rest>;
}

/** What a helper tells the approval check about its framework. @internal */
export interface FrameworkApprovals<I, Rest extends unknown[]> {
  /** The decisions the framework reports for this call (and siblings of its turn), read from what the tool was given. */
  reported?: (input: I, rest: Rest, site: CallSite) => ReportedDecision[] | Promise<ReportedDecision[]>;
  /** The call's arguments as the model sent them (what a decision covers). Default: the input. */
  args?: (input: I, rest: Rest) => unknown;
  /** What the framework gets when the call does not run (its rejection-shaped answer). Default: the refusal's error is thrown. */
  refused?: (refusal: Refusal, input: I, rest: Rest, site: CallSite) => unknown;
}

/** What `identify` may know about the wrapped tool. @internal */
export interface ToolIdentity {
  /** The `name` option, else `fn.name` ('' when anonymous). */
  name: string;
  /** The tool call the enclosing helper call (if any) is running. */
  enclosing: ToolCallInfo | undefined;
}

const current = new AsyncLocalStorage<ToolCallInfo>();

interface CallState {
  ran: boolean;
  suspended: boolean;
  self: unknown;
  site: CallSite;
  /** The tool's name in keys and records, and as decisions name it. */
  name: string;
  startedAt: number;
  /** Runs the helper's tool function (the body of `runTool`). */
  exec: (state: CallState, input: unknown, frameworkArgs: unknown[]) => Promise<unknown>;
}

/**
 * The one function every helper hands to `idempotent()`: what it runs travels in the
 * call's state. Tools are rebuilt per request, so the function the core sees for a name
 * must be the same every time; different tools are told apart by the tool call id in the key.
 */
async function runTool(input: unknown, _info: ToolCallInfo, state: CallState, frameworkArgs: unknown[]): Promise<unknown> {
  state.ran = true;
  return state.exec(state, input, frameworkArgs);
}

const KNOWN_OPTIONS = new Set([
  'store', 'name', 'ttlMs', 'onDuplicate', 'pollIntervalMs', 'pollTimeoutMs', 'leaseMs', 'key', 'payload', 'onEvent', 'annotate', 'reconcile',
  // The size limits go to the core as they are (the type offers them: they must work).
  'maxKeyBytes', 'maxArgsBytes', 'maxResultBytes',
]);

/**
 * A result the framework made out of a failure (see `Framework.failedOutput`): thrown
 * through the core so the record is `failed`, then handed back to the framework as it was.
 */
class ToolErrorOutput extends Error {
  override readonly name = 'ToolErrorOutput';
  constructor(readonly value: unknown, message: string, readonly owner: object) {
    super(message);
  }
}

/**
 * The explicit key of a call under a business key: readable first (so
 * `inspect --key order-42` finds it by prefix), then the tool and a digest of the
 * conversation, so two tools or two conversations never share it.
 */
function businessKeyOf(businessKey: string, name: string, conversation: Json): string {
  const digest = createHash('sha256').update(canonicalJson({ name, conversation })).digest('hex').slice(0, 32);
  return `${businessKey}|${name}|${digest}`;
}

/** `err` with the tool's name after the helper's prefix, so the developer knows which tool it was. */
function namingTool(err: unknown, where: string, name: string): unknown {
  if (!(err instanceof TypeError) || name === '') return err;
  const prefix = `${where}: `;
  if (!err.message.startsWith(prefix) || err.message.includes(`tool "${name}"`)) return err;
  const message = `${prefix}tool "${name}": ${err.message.slice(prefix.length)}`;
  if (err instanceof CannotTellError) return new CannotTellError(err.option, message);
  return new TypeError(message, err.cause === undefined ? undefined : { cause: err.cause });
}

/** Whether the core `idempotent()` takes an option (the record metadata option arrived later). */
const coreTakes = new Map<string, boolean>();
function coreAccepts(option: string): boolean {
  let known = coreTakes.get(option);
  if (known === undefined) {
    try {
      resolveOptions(function probe() {}, { [option]: () => undefined } as IdempotentOptions);
      known = true;
    } catch {
      known = false;
    }
    coreTakes.set(option, known);
  }
  return known;
}

/**
 * Wraps `fn(input, ...rest)`. `framework.identify(input, rest)` names the tool call; the key
 * is SHA-256 over the name, `{ scope, toolCallId }` and the canonical JSON of
 * `payload(input)`. The rest of the arguments (the framework's context objects) never take
 * part in the key.
 * @internal
 */
export function wrapToolCall<I, Rest extends unknown[], R>(
  framework: Framework<I, Rest>,
  fn: (input: I, ...rest: Rest) => R,
  options: (ToolHelperOptions<I, R> & Record<string, unknown>) | undefined,
): (input: I, ...rest: Rest) => Promise<unknown> {
  const where = `idempotent-tools/${framework.name}`;
  if (typeof fn !== 'function') {
    throw new TypeError(`${where}: the tool function must be a function, not ${fn === null ? 'null' : typeof fn}`);
  }
  const o = (options ?? {}) as Record<string, unknown>;
  if (o === null || typeof o !== 'object') throw new TypeError(`${where}: options must be an object`);
  for (const option of Object.keys(o)) {
    if (option === 'context') {
      throw new TypeError(
        `${where}: option "context" is not taken here: the helper derives the scope from the tool call (its thread or conversation) and the input. ` +
          'Pass "scope" for the conversation, "key": (input) => `order-${input.orderId}` for a business key, or "payload" to choose which part of the input identifies the call.',
      );
    }
    if (!KNOWN_OPTIONS.has(option)) {
      throw new TypeError(`${where}: option "${option}" is not an option; the options are ${[...KNOWN_OPTIONS].join(', ')}`);
    }
  }
  const { key: businessKey, payload, onEvent, annotate, reconcile, ...rest } = o as ToolHelperOptions<I, R>;
  for (const [option, value] of Object.entries({ key: businessKey, payload, onEvent, annotate, reconcile })) {
    if (value !== undefined && typeof value !== 'function') {
      throw new TypeError(`${where}: option "${option}" must be a function, not ${value === null ? 'null' : typeof value}`);
    }
  }
  if ((rest.onDuplicate as string | undefined) === 'raise') {
    throw new TypeError(
      `${where}: onDuplicate "raise" is refused here: a re-run of a tool call whose first run is still going would hand the model ` +
        'an error, and the model would call the tool again under a new id. Leave the default ("block": wait for the first run\'s result).',
    );
  }
  const fixedName = typeof rest.name === 'string' && rest.name.length > 0 ? rest.name : fn.name;
  if (fixedName === '' && !framework.carriesToolName) {
    throw new TypeError(
      `${where}: the tool function is anonymous, and this framework does not tell the tool its name when it calls it. ` +
        'Name the function (async function sendPayment(input) { ... }) or pass the "name" option. The name is part of every key.',
    );
  }

  type Args = [I, ToolCallInfo, CallState, Rest];
  const pick = payload ?? ((input: I) => (input === undefined ? null : input));
  const warned = new Set<string>();
  /** A configuration error reaches the framework (and the model) as a TypeError, and the developer as a warning. */
  const configurationError = (err: unknown): unknown => {
    if (err instanceof TypeError && !warned.has(err.message)) {
      warned.add(err.message);
      if (warned.size <= 20) process.emitWarning(err.message, { type: 'IdempotentToolsWarning', code: 'IDEMPOTENT_TOOLS_CONFIG' });
    }
    return err;
  };

  /** The approval check (approval-guard.ts), just before the tool runs: why it may not, or undefined. */
  const approvalCheck = async (state: CallState, input: unknown, frameworkArgs: unknown[]): Promise<Refusal | undefined> => {
    const { site } = state;
    const toolName = site.toolName ?? state.name;
    const approvals = framework.approvals;
    const modelArgs = approvals?.args ? approvals.args(input as I, frameworkArgs as Rest) : input;
    let argsFingerprint: string;
    try {
      argsFingerprint = approvalArgsFingerprint(toolName, modelArgs);
    } catch {
      argsFingerprint = approvalArgsFingerprint(toolName, pick(input as I)); // checked encodable before the call
    }
    const reported = approvals?.reported ? await approvals.reported(input as I, frameworkArgs as Rest, site) : [];
    return checkApproval(
      // The store of the call being checked (its record is there): the given one, or the default it resolved to.
      running.getStore()?.store ?? (rest.store as Store | undefined) ?? defaultStore(),
      { scope: site.approvalScope ?? site.conversation ?? site.scope, turn: site.turn ?? null, toolCallId: site.toolCallId, toolName, argsFingerprint, executionScope: site.scope },
      reported,
      {
        source: framework.name,
        ttlMs: rest.ttlMs,
        meta: (toolCallId) => ({ framework: site.framework, toolCallId, scope: scopeLabel(site.scope) }),
        emit: (toolCallId, event) => {
          const full = { ...event, durationMs: performance.now() - state.startedAt, framework: site.framework, toolCallId, scope: site.scope };
          publish(onEvent as ((e: IdempotencyEvent) => void) | undefined, full);
        },
      },
    );
  };

  const exec = async (state: CallState, input: unknown, frameworkArgs: unknown[]) => {
    try {
      const refusal = await approvalCheck(state, input, frameworkArgs);
      if (refusal !== undefined) throw new ApprovalRefusal(refusal, state);
      const args = framework.prepare ? framework.prepare(frameworkArgs as Rest, () => (state.suspended = true)) : frameworkArgs;
      let value: unknown = await fn.apply(state.self, [input as I, ...(args as Rest)]);
      value = await drained(value, framework.generator);
      if (state.suspended) throw new ToolSuspended(value);
      const failure = framework.failedOutput?.(value);
      if (failure !== undefined) throw new ToolErrorOutput(value, failure, state);
      // The model reads the result as text either way: a Date is its ISO string on the first call too.
      return withToJsonApplied(framework.toStorable ? framework.toStorable(value) : value);
    } catch (thrown) {
      const signal = state.site.signal as { aborted?: unknown } | undefined;
      if (signal !== null && typeof signal === 'object' && signal.aborted === true) markAborted(thrown);
      throw thrown;
    }
  };

  const byName = new Map<string, IdempotentFunction<Args, Promise<unknown>>>();
  const coreOptions = (name: string) => {
    const core: IdempotentOptions<Args> & Record<string, unknown> = {
      ...(rest as IdempotentOptions<Args>),
      name,
      onDuplicate: rest.onDuplicate ?? 'block',
      context: (_input, info) => ({ scope: info.scope, toolCallId: info.toolCallId }),
      payload: (input) => pick(input),
      onEvent: onEvent && ((event) => {
        const info = current.getStore();
        onEvent(info === undefined ? (event as ToolCallEvent) : { ...event, ...info });
      }),
      // A re-run waiting for the same call in flight stops when the framework aborts it.
      [WAIT_SIGNAL]: (_input: I, _info: ToolCallInfo, state: CallState) => state.site?.signal,
    };
    if (reconcile !== undefined) {
      core.reconcile = (request: { key: string; name: string; args: Args; attempts: number }) => {
        const [input, info, , frameworkArgs] = request.args;
        return reconcile({ key: request.key, name: request.name, attempts: request.attempts, input, args: [input, ...frameworkArgs], toolCall: info });
      };
    }
    if (coreAccepts('meta')) {
      core.meta = (_input: I, info: ToolCallInfo): RecordMeta => ({
        framework: info.framework,
        toolCallId: info.toolCallId,
        scope: scopeLabel(info.scope),
      });
    }
    return core;
  };
  const coreFor = (name: string) => {
    let wrapped = byName.get(name);
    if (wrapped === undefined) {
      wrapped = idempotent<Args, Promise<unknown>>(runTool as (...args: Args) => Promise<unknown>, coreOptions(name));
      byName.set(name, wrapped);
    }
    return wrapped;
  };
  // Options are checked at wrap time, whatever the name will be.
  if (fixedName !== '') coreFor(fixedName);
  else resolveOptions(runTool, coreOptions('anonymous tool'));

  const wrapper = async function (this: unknown, input: I, ...frameworkArgs: Rest): Promise<unknown> {
    const tool: ToolIdentity = { name: fixedName, enclosing: current.getStore() };
    const foreign = framework.nested?.(input, frameworkArgs, tool);
    if (foreign !== undefined) return runNested(this, input, frameworkArgs, foreign);
    let site: CallSite;
    let name: string;
    let key: string;
    const state: CallState = { ran: false, suspended: false, self: this, site: undefined as never, name: '', startedAt: performance.now(), exec };
    let args: Args;
    let business: string | undefined;
    try {
      site = await framework.identify(input, frameworkArgs, tool);
      name = fixedName || site.toolName || '';
      if (name === '') {
        throw new TypeError(
          `${where}: the tool function is anonymous and the framework did not say the tool's name. ` +
            'Name the function (async function sendPayment(input) { ... }) or pass the "name" option.',
        );
      }
      state.site = site;
      state.name = name;
      const info: ToolCallInfo = { framework: site.framework, toolCallId: site.toolCallId, scope: site.scope };
      args = [input, info, state, frameworkArgs];
      checkEncodable(where, name, pick, input, info.scope);
      if (businessKey !== undefined) {
        business = businessKeyFrom(where, businessKey, input);
        key = businessKeyOf(business, name, site.conversation ?? site.scope);
      } else {
        // Ids that repeat (call_0 every turn) and nothing that tells this call's turn: no key
        // from the id would be this call's alone. A business key would be (above).
        if (site.turnUnknown !== undefined) throw site.turnUnknown;
        key = coreFor(name).keyFor(...args);
      }
    } catch (err) {
      // The name the model calls the tool by, when the framework says it; else the wrapper's.
      let shown = '';
      try {
        shown = framework.toolNameOf?.(input, frameworkArgs) ?? '';
      } catch {
        shown = '';
      }
      if (shown === '') shown = fixedName;
      throw configurationError(namingTool(err, where, shown));
    }
    // A stored result that may not be this call's own (its turn, told by content, reads as
    // an earlier one's): cannot tell a retry from a new call, so refuse.
    if (business === undefined && site.ambiguousReplay !== undefined) {
      const record = await ((rest.store as Store | undefined) ?? defaultStore()).get(key);
      const why = record?.status === 'completed' ? site.ambiguousReplay(input, record.result) : undefined;
      if (why !== undefined) {
        throw configurationError(
          new CannotTellError(
            'key',
            `${where}: tool "${name}" call ${site.toolCallId} ${why}: replaying the stored result could skip a call the model asked for again, and running could repeat a retried one. ` +
              'Give the tool a business key that names the call: { key: (input) => `order-${input.orderId}` }.',
          ),
        );
      }
    }
    // The enclosing wrapped call has this very key (a tool wrapped with idempotentTool under
    // idempotentToolsMiddleware, keyed alike): it is the same call, whose record the enclosing
    // one holds. Waiting for that record would wait for ourselves: run the tool as its body.
    if (running.getStore()?.key === key) {
      let value: unknown = await fn.apply(this, [input, ...frameworkArgs]);
      value = await drained(value, framework.generator);
      return value;
    }
    const wrapped = coreFor(name);
    const info = args[1];
    let result: unknown;
    let leaseLost = false;
    const call = business === undefined ? wrapped : wrapped.withKey(key);
    for (;;) {
      try {
        result = await current.run(info, () => call(...args));
        break;
      } catch (err) {
        if (err instanceof ToolSuspended && state.suspended) return err.value; // the framework gets what suspend() gave
        if (err instanceof ToolErrorOutput && err.owner === state) return err.value; // recorded as failed; the framework's own rendering
        if (err instanceof ApprovalRefusal && err.owner === state) {
          // Rejected, or approved for other arguments: the tool did not run; the framework gets its answer.
          const refused = framework.approvals?.refused;
          if (refused === undefined) throw err.refusal.error;
          return refused(err.refusal, input, frameworkArgs, site);
        }
        if (business !== undefined && (err as { code?: unknown } | null)?.code === 'KEY_MISMATCH' && (err as { key?: unknown }).key === key) {
          throw new KeyMismatchError(
            `${where}: tool "${name}" was already called in this conversation with the business key "${business}" (its "key" option) and other input. ` +
              'A business key names one call: the first call\'s input stands. To make another call, give it another key; ' +
              'to change the first one, use the API that changes it (refund, update), not this tool again.',
            { key },
          );
        }
        const signal = site.signal as { aborted?: unknown } | undefined;
        if (signal !== null && typeof signal === 'object' && signal.aborted === true) throw err;
        const code = (err as { code?: unknown; key?: unknown } | null)?.code;
        if ((err as { key?: unknown }).key !== key) throw err;
        // Past pollTimeoutMs the first run is still going (its owner renews its lease): keep waiting.
        if (code === 'IN_FLIGHT_TIMEOUT') continue;
        // This run's claim was taken over while it ran (its owner paused past the lease, or
        // a 'retry' call claimed it): the record holds the other run's outcome. Hand that to
        // the framework, not an error the model would answer by calling the tool again.
        // (Not with 'retry': calling again would claim the key and run once more.)
        if (code === 'LEASE_LOST' && !leaseLost && rest.onDuplicate !== 'retry') {
          leaseLost = true;
          continue;
        }
        throw err;
      }
    }
    if (framework.revive) result = await framework.revive(result);
    if (annotate === undefined) return result;
    return annotate(result as Awaited<R>, { ...info, key, replayed: !state.ran });
  };
  Object.defineProperty(wrapper, 'name', { value: fixedName });

  /** A nested call with the enclosing call's framework context: a step of the enclosing wrapped call. */
  async function runNested(self: unknown, input: I, frameworkArgs: Rest, foreign: string): Promise<unknown> {
    let label: string;
    try {
      label = `tool ${fixedName || 'anonymous'} ${checkEncodable(where, fixedName || 'anonymous tool', pick, input, null)}`;
    } catch (err) {
      throw configurationError(err);
    }
    const run = async () => {
      let value: unknown = await fn.apply(self, [input, ...frameworkArgs]);
      value = await drained(value, framework.generator);
      return withToJsonApplied(framework.toStorable ? framework.toStorable(value) : value);
    };
    const stepped = stepOfRunningCall(label, run);
    if (stepped === undefined) {
      throw configurationError(
        new TypeError(
          `${where}: this tool was invoked with another tool call's context (${foreign}), ` +
            'and has no tool call of its own. Invoke it as its own tool call (tool.invoke({ id, name, args, type: "tool_call" }, config)), ' +
            'or call it from inside a wrapped tool (then it runs as a step of that call).',
        ),
      );
    }
    let result = await stepped;
    if (framework.revive) result = await framework.revive(result);
    return result;
  }

  return wrapper;
}

/**
 * The scope as `inspect --scope` shows and filters it: the thread, chat or conversation id,
 * which each helper puts first in its scope (`{ thread, checkpoint_ns, message }`,
 * `{ chat, turn }`, `{ conversation, ... }`); a scope of another shape as JSON.
 */
export function scopeLabel(scope: Json): string {
  let value: Json = scope;
  for (let depth = 0; depth < 4 && value !== null && typeof value === 'object' && !Array.isArray(value); depth++) {
    const first = Object.values(value)[0];
    if (first === undefined) break;
    value = first;
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** Checks that the payload (and scope) can be keyed; a TypeError that points at "payload" otherwise. Returns the payload's JSON. */
function checkEncodable<I>(where: string, name: string, pick: (input: I) => unknown, input: I, scope: Json | null): string {
  let json: string;
  let picked: unknown;
  try {
    picked = pick(input);
  } catch (err) {
    throw new TypeError(`${where}: the "payload" option of tool "${name}" threw: ${messageOf(err)}. Return the JSON data that identifies the call from the input.`, { cause: err });
  }
  try {
    json = canonicalJson(picked);
  } catch (err) {
    if (!(err instanceof Unencodable)) throw err;
    throw new TypeError(
      `${where}: cannot derive a key for tool "${name}": ${err.pathFrom('payload')} is ${err.what}. ` +
        'The key is made from the tool call and the JSON of its input: pass a "payload" option that picks JSON data ' +
        'from the input (payload: (input) => ({ orderId: input.orderId })), or keep non-JSON values (BigInt, Set, Map from a schema transform) out of it.',
      { cause: err },
    );
  }
  try {
    canonicalJson(scope);
  } catch (err) {
    if (!(err instanceof Unencodable)) throw err;
    throw new TypeError(`${where}: the scope of tool "${name}" cannot be keyed: ${err.pathFrom('scope')} is ${err.what}. Return a string id (or JSON data) from "scope".`, { cause: err });
  }
  return json;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The business key of a call: the "key" option's string, or a TypeError that says what it returned. */
function businessKeyFrom<I>(where: string, key: (input: I) => string, input: I): string {
  let value: unknown;
  try {
    value = key(input);
  } catch (err) {
    throw new TypeError(`${where}: the "key" option threw: ${messageOf(err)}. It gets the tool's input and must return a non-empty string (a business key such as \`order-\${input.orderId}\`).`, { cause: err });
  }
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${where}: the "key" option returned ${describe(value)}; it must return a non-empty string (a business key such as \`order-\${input.orderId}\`).`);
  }
  return value;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function';
}

function isGenerator(value: unknown): value is Generator<unknown> {
  return Object.prototype.toString.call(value) === '[object Generator]';
}

/**
 * A generator's (or any async iterable's) final value: the tool's body runs inside its
 * record (the iterable itself is not a result). LangChain's streamed tools end with their
 * return value; the AI SDK's preliminary results end with their last yield.
 */
async function drained(value: unknown, mode: GeneratorResult): Promise<unknown> {
  let it: AsyncIterator<unknown> | Iterator<unknown>;
  if (isAsyncIterable(value)) it = value[Symbol.asyncIterator]();
  else if (isGenerator(value)) it = value;
  else return value;
  let last: unknown;
  for (;;) {
    const step = await it.next();
    if (step.done) return mode === 'return-value' ? step.value : last;
    last = step.value;
  }
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
  let value: Json | undefined;
  try {
    value = typeof scope === 'function' ? scope(...call) : scope;
  } catch (err) {
    throw new TypeError(
      `idempotent-tools/${framework}: the "scope" option threw: ${messageOf(err)}. ` +
        `It must return the conversation's id (a string or JSON data) for every call of this tool: ${hint}`,
      { cause: err },
    );
  }
  if (value === undefined || value === null || value === '') {
    throw new TypeError(
      `idempotent-tools/${framework}: ${typeof scope === 'function' ? 'the "scope" option returned ' + describe(value) : 'the "scope" option is missing'}. ` +
        `Tool call ids are only unique within one conversation or run, so the key needs a scope: ${hint}`,
    );
  }
  return value;
}

/** What the tool-set helpers (`idempotentTools`) take besides the options of each tool. */
export interface ToolSetChoices<PerTool> {
  /** Options per tool name (a business `key`, a `payload`, ...), or `false` (or `{ guard: false }`) to leave a tool unguarded. */
  tools?: Record<string, (PerTool & { guard?: boolean }) | false>;
  /** Tools without side effects (search, lookups): left as they are. */
  readOnly?: string[];
}

/**
 * Splits a tool-set helper's options into the defaults and a per-tool lookup: `undefined`
 * for a tool left unguarded, else its options (the defaults, its own over them, and its name).
 * Names in `tools` or `readOnly` that the set does not have are a TypeError (a typo would
 * leave a tool unguarded, or guarded when it should not be). @internal
 */
export function toolSetOptions<O extends object>(
  where: string,
  names: string[],
  options: (O & ToolSetChoices<Partial<O>>) | undefined,
): (name: string) => (O & { name: string }) | undefined {
  if (options !== undefined && (options === null || typeof options !== 'object' || Array.isArray(options))) {
    throw new TypeError(`${where}: idempotentTools(tools, options): options must be an object, not ${describe(options)}`);
  }
  const { tools: perTool = {}, readOnly = [], ...defaults } = (options ?? {}) as ToolSetChoices<Partial<O>> & Record<string, unknown>;
  if ('name' in defaults) {
    throw new TypeError(`${where}: option "name" is not taken by idempotentTools(): each tool's records are named after its name in the set.`);
  }
  if (perTool === null || typeof perTool !== 'object' || Array.isArray(perTool)) {
    throw new TypeError(`${where}: option "tools" must be an object of tool names to options (or false), not ${describe(perTool)}`);
  }
  if (!Array.isArray(readOnly) || readOnly.some((n) => typeof n !== 'string')) {
    throw new TypeError(`${where}: option "readOnly" must be an array of tool names, not ${describe(readOnly)}`);
  }
  const known = new Set(names);
  for (const name of [...Object.keys(perTool), ...readOnly]) {
    if (!known.has(name)) {
      throw new TypeError(`${where}: tool "${name}" (in the "tools" or "readOnly" option) is not in the tool set; its tools are ${names.map((n) => `"${n}"`).join(', ') || 'none'}.`);
    }
  }
  const skipped = new Set(readOnly);
  for (const [name, entry] of Object.entries(perTool)) {
    if (entry !== false && (entry === null || typeof entry !== 'object' || Array.isArray(entry))) {
      throw new TypeError(`${where}: tools["${name}"] must be an object of options or false, not ${describe(entry)}`);
    }
    if (entry === false || entry.guard === false) skipped.add(name);
    else if (entry.guard !== undefined && entry.guard !== true) {
      throw new TypeError(`${where}: tools["${name}"].guard must be true or false, not ${describe(entry.guard)}`);
    }
  }
  return (name) => {
    if (skipped.has(name)) return undefined;
    const entry = perTool[name];
    const { guard: _, ...own } = entry === false || entry === undefined ? {} : entry;
    return { ...defaults, ...own, name } as unknown as O & { name: string };
  };
}

/** A shallow copy of a tool object that keeps its class and every own property, with `overrides` on top. @internal */
export function copyTool<T extends object>(tool: T, overrides: Record<string, unknown>): T {
  const copy = Object.create(Object.getPrototypeOf(tool), Object.getOwnPropertyDescriptors(tool)) as T;
  for (const [k, v] of Object.entries(overrides)) Object.defineProperty(copy, k, { value: v, writable: true, enumerable: true, configurable: true });
  return copy;
}
