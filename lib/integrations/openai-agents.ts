/**
 * `idempotent-tools/openai-agents`: idempotent `execute` functions for OpenAI Agents JS
 * tools (`execute(input, runContext, details)`, the call id at `details.toolCall.callId`).
 * Imports nothing from `@openai/agents`: it only reads the objects it is given.
 *
 * Call ids are only unique within one conversation, so a `scope` is required: a
 * conversation or run id, typically from your run context (`runContext.context`), which is
 * serialized with the `RunState` and so is the same when a run is resumed.
 *
 * ```ts
 * import { tool } from '@openai/agents';
 * import { idempotentTool } from 'idempotent-tools/openai-agents';
 *
 * const sendPayment = tool({
 *   name: 'send_payment',
 *   parameters: z.object({ orderId: z.string(), cents: z.number() }),
 *   needsApproval: true,
 *   execute: idempotentTool(async function sendPayment({ orderId, cents }) { ... }, {
 *     scope: (input, runContext) => runContext.context.conversationId,
 *   }),
 * });
 * ```
 */

import { createHash, randomUUID } from 'node:crypto';

import { recordApproval } from '../core/approvals.js';
import { canonicalJson } from '../core/canonical.js';
import { defaultStore } from '../core/default-store.js';
import { ApprovalMismatchError } from '../core/errors.js';
import type { Store } from '../core/store.js';
import { CannotTellError, isUniqueCallId } from './identity.js';
import { type Framework, type Json, type Scope, type ToolHelperOptions, type ToolSetChoices, copyTool, describe, idOf, resolveScope, toolSetOptions, wrapToolCall } from './shared.js';

export type { Json, ToolCallEvent, ToolCallInfo, ToolCallOutcome, ToolReconcileRequest, ToolReconcileAnswer } from './shared.js';

/** The parts of an Agents SDK `RunContext` this helper reads: the context for `scope`, and the approvals. */
export interface RunContextLike<C = any> {
  context: C;
  isToolApproved?(approval: { toolName: string; callId: string }): boolean | undefined;
  getRejectionMessage?(toolName: string, callId: string): string | undefined;
}

/** The parts of the Agents SDK's `ToolCallDetails` this helper reads. */
export interface ToolCallDetailsLike {
  toolCall?: { callId?: string; id?: string; name?: string; arguments?: string };
  signal?: unknown;
}

/** What the Agents SDK tells the model for a rejected call (its TOOL_APPROVAL_REJECTION_MESSAGE). */
const REJECTION_MESSAGE = 'Tool execution was not approved.';

/** The model's arguments of the call (its JSON text, parsed), for approvals; undefined when absent or not JSON. */
function modelArguments(details: ToolCallDetailsLike | undefined): unknown {
  const text = details?.toolCall?.arguments;
  if (typeof text !== 'string') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Ids that name no model response: what the Agents SDK and its model adapters put where a
 * provider sent none (`FAKE_ID` in @openai/agents-openai, `__fake_id__` elsewhere).
 */
const PLACEHOLDER_IDS = new Set(['FAKE_ID', '__fake_id__']);

/** The item id of a call when it names a model response or item (not a placeholder, not absent). */
function realItemId(toolCall: { id?: unknown } | undefined): string | undefined {
  const id = idOf(toolCall?.id);
  return id === undefined || PLACEHOLDER_IDS.has(id) ? undefined : id;
}

/**
 * Turns of calls whose model response carries no id, minted when the Runner asks the tool
 * whether the call needs approval (a new call of the model: `needsApproval`, which
 * `idempotentTools` wraps): per RunContext (the run, kept across an interruption and
 * `run(agent, state)` in this process), `<tool>\0<call id>` to the turn, and whether an
 * invocation has used it. A minted turn names one call: the first invocation after the mint
 * takes it; another invocation of the same id with no mint between (the Runner asks no more
 * once it holds a decision for the id) is a later call reusing the id. Calls with an item id
 * are tracked the same way (`item`: the item that took the slot), for the same reason: the
 * Runner holds one decision per call id, whatever the item.
 */
interface MintedTurn {
  /** Null for a call a resumed run learned was made before it was saved (`takeKeptCalls`). */
  turn: string | null;
  used: boolean;
  /** The output item id of the invocation that took the slot, when the call had one. */
  item?: string;
  /** Where the turn is kept in the store (`keepTurn`), so that its invocation can mark it taken. */
  kept?: { store: Store; key: string; ttlMs: number | undefined };
}
const minted = new WeakMap<object, Map<string, MintedTurn>>();

/** Where the turns minted for one call id of one tool in one conversation are kept, one record each, newest last. */
function turnChain(scope: Json, toolName: string, callId: string): string {
  const digest = createHash('sha256').update(canonicalJson({ scope, toolName, callId })).digest('hex').slice(0, 32);
  return `idempotent-tools:turn|${toolName}|${callId}|${digest}`;
}

/** How many turns of one call id a conversation may mint (a chain longer than this is read no further). */
const CHAIN_MAX = 1000;

/**
 * A call's turn as kept in the store, with the calls (`<tool>\0<call id>` slots) its run had
 * already made when the call waited for approval: a run saved there and resumed takes those
 * as made, so a later response reusing one of their ids is a reuse there too. `args`: a
 * digest of the call's input, so that a saved run resumed later finds its own call's turn
 * among the conversation's turns of the same call id; `key`: where it is kept; `invoked`:
 * whether an invocation has taken it (a marker beside it, `<key>|invoked`).
 */
interface KeptTurn {
  turn: string;
  taken: string[];
  args?: string;
  key: string;
  invoked: boolean;
  /** What is left of the kept turn's window, for its marker (none: kept for good). */
  ttlMs?: number;
}

/** What tells two calls of one id apart by their input (the parsed arguments, as both the guard and needsApproval see them). */
function argsDigest(input: unknown): string {
  let text: string;
  try {
    text = canonicalJson(parsedInput(input) as Json);
  } catch {
    text = `unkeyable:${String(input)}`; // no JSON form: matches only the same text
  }
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}

/**
 * Marks a kept turn taken by an invocation, for as long as the turn is kept (best effort: a
 * store that is down fails the call itself when it runs).
 */
async function markInvoked(store: Store, key: string, ttlMs: number | undefined): Promise<void> {
  const marker = `${key}|invoked`;
  try {
    const claim = await store.acquire({ key: marker, name: 'idempotent-tools:turn-invoked', fingerprint: 'idempotent-tools:turn-invoked', leaseMs: 30_000, ttlMs, force: false });
    if (claim.acquired) await store.complete({ key: marker, token: claim.token, resultJson: 'true', ttlMs });
  } catch {
    // The call's own record is what guards its side effect; the marker only narrows which
    // kept turn a later resumed run can be.
  }
}

/**
 * Keeps `turn` as the newest turn of the call in the store: a run saved at its interruption
 * and resumed from its string (in this process or another: a new RunContext, nothing of
 * ours in the saved state) finds it there.
 */
async function keepTurn(store: Store, chain: string, toolName: string, kept: Omit<KeptTurn, 'key' | 'invoked'>, ttlMs: number | undefined): Promise<string | undefined> {
  for (let n = 1; n <= CHAIN_MAX; n++) {
    const key = `${chain}|${n}`;
    const claim = await store.acquire({ key, name: `idempotent-tools:turn:${toolName}`, fingerprint: 'idempotent-tools:turn', leaseMs: 30_000, ttlMs, force: false });
    if (!claim.acquired) continue;
    await store.complete({ key, token: claim.token, resultJson: JSON.stringify(kept), ttlMs });
    return key;
  }
  return undefined;
}

/** The turns kept for the call (see keepTurn), oldest first. (A bare string: kept by an earlier version, with no calls.) */
async function keptTurns(store: Store, chain: string): Promise<KeptTurn[]> {
  const turns: KeptTurn[] = [];
  for (let n = 1; n <= CHAIN_MAX; n++) {
    const key = `${chain}|${n}`;
    const r = await store.get(key);
    if (r === null) break;
    if (r.status !== 'completed') continue;
    const result = r.result as { turn?: unknown; taken?: unknown; args?: unknown } | string | null;
    const invoked = (await store.get(`${key}|invoked`))?.status === 'completed';
    // A minute past the turn's own expiry: the store's clock may be ahead of this one, and a
    // marker gone before its turn would make a taken turn look open.
    const ttlMs = r.expiresAt === null ? undefined : Math.max(1, r.expiresAt - Date.now()) + 60_000;
    const where = { key, invoked, ...(ttlMs === undefined ? {} : { ttlMs }) };
    if (typeof result === 'string') turns.push({ turn: result, taken: [], ...where });
    else if (result !== null && typeof result === 'object' && typeof result.turn === 'string') {
      const taken = Array.isArray(result.taken) ? result.taken.filter((t): t is string => typeof t === 'string') : [];
      turns.push({ turn: result.turn, taken, ...(typeof result.args === 'string' ? { args: result.args } : {}), ...where });
    }
  }
  return turns;
}

/** The newest turn kept for the call, or null: what a resumed run with an item id of its own takes the made calls from. */
async function keptTurn(store: Store, chain: string): Promise<KeptTurn | null> {
  return (await keptTurns(store, chain)).at(-1) ?? null;
}

/**
 * Which kept turn is a resumed run's call (a new RunContext, no item id, a numbered call id):
 * among the conversation's turns of this call id, the ones asked for this input; of those, the
 * one no invocation has taken yet when there are several. `'ambiguous'` when that still leaves
 * more than one (two asks of one call id with the same input, both run, or both not yet):
 * nothing the tool is given tells which this run is, and a guess could hand one call the
 * other's result. Of several turns, none asked for this input (its state edited, or turns
 * kept by a version that kept no digest): `'ambiguous'` too, not the newest, which was the
 * guess this replaced. A lone kept turn is the call's (the approval's own check refuses an
 * input that is not the approved one).
 */
function resumedTurn(kept: KeptTurn[], input: unknown): KeptTurn | null | 'ambiguous' {
  if (kept.length <= 1) return kept[0] ?? null;
  const args = argsDigest(input);
  const asked = kept.filter((k) => k.args === undefined || k.args === args);
  if (asked.length === 0) return 'ambiguous';
  if (asked.length === 1) return asked[0];
  const open = asked.filter((k) => !k.invoked);
  return open.length === 1 ? open[0] : 'ambiguous';
}

/** The calls this run (RunContext) has made so far: their slots. */
function takenSlots(runContext: object): string[] {
  return [...(minted.get(runContext) ?? new Map<string, MintedTurn>())].filter(([, t]) => t.used).map(([slot]) => slot);
}

/**
 * A run resumed from a saved state takes a kept turn: the calls its run had made by then are
 * made in this one too (their slots used, with no item), unless this run has its own.
 */
function takeKeptCalls(context: object, kept: KeptTurn): void {
  for (const slot of kept.taken) if (minted.get(context)?.get(slot) === undefined) takeSlot(context, slot, { turn: null, used: true });
}

/** A new turn for a call of this run (its RunContext): `used` when an invocation takes it at once. */
function mintTurn(runContext: object, toolName: string, callId: string, used: boolean): string {
  const turn = `run:${randomUUID()}`;
  let calls = minted.get(runContext);
  if (calls === undefined) minted.set(runContext, (calls = new Map()));
  calls.set(`${toolName}\0${callId}`, { turn, used });
  return turn;
}

/**
 * What tells the turn of a call apart: the turn (null when nothing does), and whether this
 * invocation reuses a call id another call of this run has already taken (the Runner asked
 * nothing about it: it holds a decision for the id).
 */
interface AgentsTurn {
  turn: string | null;
  reused: boolean;
  /** A resumed run whose call could be either of several kept turns (see resumedTurn). */
  ambiguous?: boolean;
}

/**
 * The turn of a call, from what both kinds of model give the tool. The output item's id
 * where there is one: with a Chat Completions model it is the model response's own id
 * (`chatcmpl-…`, shared by the calls of one response), with the Responses API the item's
 * (`fc_…`). For a model whose responses carry no id (a placeholder, or none): the call id
 * itself when its provider makes it unique (`isUniqueCallId`); else the turn minted when the
 * model made the call (see `minted` and `keepTurn`; `idempotentTools` mints them), from this
 * run's RunContext, else the newest kept in the store (a saved run resumed in a new
 * RunContext). Never a numbered call id alone, which providers restart every turn (`call_0`). `consume` (an invocation, not a rejection's record): the call takes its slot
 * in this run, and a later invocation of the id in this run with no new mint (another item,
 * or no item id at all) is `reused`. `{ turn: null, reused: false }` when nothing tells the
 * turn (the per-tool `idempotentTool` with such a model, which sees no new call).
 */
async function agentsTurn(
  runContext: unknown,
  toolCall: { id?: unknown } | undefined,
  toolName: string | undefined,
  callId: string,
  chain: () => { store: Store; key: string } | undefined,
  consume: boolean,
  /** Whether this helper keeps turns (`idempotentTools`; the per-tool helper sees no new call to keep). */
  keeps = true,
  /** The call's input: which of several kept turns of the id a resumed run's call is (resumedTurn). */
  input?: unknown,
): Promise<AgentsTurn> {
  const itemId = realItemId(toolCall);
  // No item id, but an id its provider makes unique (OpenAI's call_ + 24 characters): the id
  // names the call, in this run or any other (the same response delivered again is the same call).
  if (itemId === undefined && isUniqueCallId(callId)) return { turn: callId, reused: false };
  const context = runContext !== null && typeof runContext === 'object' ? runContext : undefined;
  if (toolName === undefined) return { turn: itemId ?? null, reused: false };
  const slot = `${toolName}\0${callId}`;
  const own = context === undefined ? undefined : minted.get(context)?.get(slot);
  if (itemId !== undefined) {
    if (consume && context !== undefined) {
      if (own === undefined && keeps) {
        // Not minted in this run: a run resumed from a saved state. What it had made by then is made.
        const where = chain();
        const kept = where === undefined ? null : await keptTurn(where.store, where.key);
        if (kept !== null) takeKeptCalls(context, kept);
      }
      const before = minted.get(context)?.get(slot);
      const reused = before !== undefined && before.used && before.item !== itemId;
      takeSlot(context, slot, { turn: itemId, used: true, item: itemId });
      return { turn: itemId, reused };
    }
    return { turn: itemId, reused: false };
  }
  if (own !== undefined && (consume || own.turn !== null)) {
    if (own.used && consume) return { turn: null, reused: true };
    if (consume) {
      own.used = true;
      if (own.kept !== undefined) await markInvoked(own.kept.store, own.kept.key, own.kept.ttlMs);
    }
    return { turn: own.turn, reused: false };
  }
  const where = chain();
  const kept = where === undefined ? null : resumedTurn(await keptTurns(where.store, where.key), input);
  if (kept === 'ambiguous') return { turn: null, reused: false, ambiguous: true };
  if (kept === null) return { turn: null, reused: false };
  if (consume && context !== undefined) {
    takeKeptCalls(context, kept);
    takeSlot(context, slot, { turn: kept.turn, used: true });
    if (!kept.invoked) await markInvoked(where!.store, kept.key, kept.ttlMs);
  }
  return { turn: kept.turn, reused: false };
}

function takeSlot(context: object, slot: string, taken: MintedTurn): void {
  let calls = minted.get(context);
  if (calls === undefined) minted.set(context, (calls = new Map()));
  calls.set(slot, taken);
}

/**
 * `needsApproval` for a guarded tool: asks the tool's own, and on the way mints the turn of
 * the call (the Runner asks once per new call of the model, before it interrupts the run
 * for an approval, and not again when the approved run resumes). A call that needs approval
 * has its turn kept in the store too, for a saved run resumed from its string.
 */
function mintingNeedsApproval(
  tool: FunctionToolLike & { needsApproval?: unknown },
  where: () => { store: Store; scope: Scope<[unknown, RunContextLike, ToolCallDetailsLike | undefined]>; ttlMs?: number },
) {
  const own = tool.needsApproval;
  return async function needsApproval(runContext: RunContextLike, input: unknown, callId?: string): Promise<boolean> {
    const needs = typeof own === 'function' ? Boolean(await own.call(tool, runContext, input, callId)) : own === true;
    if (typeof callId !== 'string' || callId === '' || runContext === null || typeof runContext !== 'object') return needs;
    const turn = mintTurn(runContext, tool.name, callId, false);
    // A unique call id is its own turn (agentsTurn): nothing to keep for a resumed run.
    if (needs && !isUniqueCallId(callId)) {
      try {
        const { store, scope, ttlMs } = where();
        const conversation = resolveScope('openai-agents', scope, [input, runContext, undefined], HINT);
        const taken = takenSlots(runContext).filter((slot) => slot !== `${tool.name}\0${callId}`);
        const key = await keepTurn(store, turnChain(conversation, tool.name, callId), tool.name, { turn, taken, args: argsDigest(input) }, ttlMs);
        const own = minted.get(runContext)?.get(`${tool.name}\0${callId}`);
        if (key !== undefined && own !== undefined && own.turn === turn) own.kept = { store, key, ttlMs };
      } catch {
        // No scope yet, or the store is down: the call's own run says so when it runs.
      }
    }
    return needs;
  };
}

export interface OpenAiAgentsToolOptions<I, R, C = any> extends ToolHelperOptions<I, R> {
  /**
   * Required: the conversation or run the call belongs to. A JSON value, or a function of
   * `(input, runContext, details)`, e.g. `(input, rc) => rc.context.conversationId`.
   */
  scope: Scope<[I, RunContextLike<C>, ToolCallDetailsLike | undefined]>;
}

const HINT =
  'pass { scope: (input, runContext) => runContext.context.conversationId } (put the id in the context you give run()), or a fixed id when you build the tools per conversation.';

/**
 * Wraps an Agents SDK tool `execute(input, runContext, details)`: the key comes from the
 * scope, `details.toolCall.callId` and the input; the run context and details are passed
 * through but never serialized into the key. A missing scope, or a call without
 * `details.toolCall.callId` (the tool called by hand, outside a run), is a TypeError.
 */
export function idempotentTool<I, R, C = any>(
  fn: (input: I, runContext: RunContextLike<C>, details?: ToolCallDetailsLike) => R,
  options: OpenAiAgentsToolOptions<I, R, C>,
): (input: I, runContext?: RunContextLike<C>, details?: ToolCallDetailsLike) => Promise<Awaited<R>> {
  const { scope, ...rest } = options ?? ({} as Partial<OpenAiAgentsToolOptions<I, R, C>>);
  if (scope === undefined || scope === null || scope === '') {
    throw new TypeError(
      `idempotent-tools/openai-agents: idempotentTool() needs a "scope" option (it is ${describe(scope)}). ` +
        `Call ids repeat across conversations; ${HINT}`,
    );
  }
  type Rest = [RunContextLike<C>, ToolCallDetailsLike | undefined];
  return wrapToolCall<I, Rest, R>(
    agentsFramework<I, Rest>(scope as Scope<[I, RunContextLike<C>, ToolCallDetailsLike | undefined]>, () => (rest.store as Store | undefined) ?? defaultStore()),
    fn as (input: I, ...rest: Rest) => R,
    rest as OpenAiAgentsToolOptions<I, R, C> & Record<string, unknown>,
  ) as (input: I, runContext?: RunContextLike<C>, details?: ToolCallDetailsLike) => Promise<Awaited<R>>;
}

/** How this helper reads a call: the call id and item id from `details`, the scope from the option. */
function agentsFramework<I, Rest extends [RunContextLike, ToolCallDetailsLike | undefined, ...unknown[]]>(
  scope: Scope<[I, RunContextLike, ToolCallDetailsLike | undefined]>,
  storeOf: () => Store,
  failedOutput?: (result: unknown) => string | undefined,
  /** The tool's own needsApproval (idempotentTools): asked for a call that reuses an id the Runner holds a decision for. */
  needsApproval?: (runContext: unknown, input: unknown, callId: string) => Promise<boolean>,
): Framework<I, Rest> {
  return {
      name: 'openai-agents',
      generator: 'last-yield',
      carriesToolName: true,
      failedOutput,
      identify: async (input, [runContext, details]) => {
        const toolCallId = idOf(details?.toolCall?.callId);
        if (toolCallId === undefined) {
          throw new TypeError(
            'idempotent-tools/openai-agents: the tool was called without details.toolCall.callId (its third argument is ' +
              `${details === null || typeof details !== 'object' ? describe(details) : 'an object without toolCall.callId'}). ` +
              'Let the Runner call it, or pass (input, runContext, { toolCall: { callId } }) when you call it directly.',
          );
        }
        const conversation = resolveScope('openai-agents', scope, [input, runContext, details], HINT);
        const toolName = typeof details?.toolCall?.name === 'string' ? details.toolCall.name : undefined;
        // The turn tells apart calls whose ids repeat (call_0 every turn): see agentsTurn.
        const chain = () => (toolName === undefined ? undefined : { store: storeOf(), key: turnChain(conversation, toolName, toolCallId) });
        const found = await agentsTurn(runContext, details?.toolCall, toolName, toolCallId, chain, true, needsApproval !== undefined, input);
        let turn = found.turn;
        if (found.reused) {
          // The Runner did not ask needsApproval (it holds a decision for this id, made for an
          // earlier call of the run): a later call reusing the id, with an item id of its own
          // or none. Its approval never covers this one; a call its tool does not ask approval
          // for is simply a new call. (The per-tool idempotentTool, which cannot ask the
          // tool's needsApproval, reads whether the run holds an approval for the id.)
          const needs =
            needsApproval !== undefined
              ? await needsApproval(runContext, input, toolCallId)
              : typeof runContext?.isToolApproved === 'function' && runContext.isToolApproved({ toolName: toolName!, callId: toolCallId }) === true;
          if (needs) {
            throw new ApprovalMismatchError(
              `idempotent-tools: tool "${toolName}" call ${toolCallId} reuses the id of a call approved earlier in this run (its provider restarts call ids, and the Runner, which holds one decision per id, did not ask about this call); ` +
                'that approval covers that call only, so this one did not run. To run it, it needs an approval of its own: ask the model again in a new turn.',
            );
          }
          turn = turn ?? mintTurn(runContext, toolName!, toolCallId, true);
        }
        return {
          framework: 'openai-agents',
          toolCallId,
          toolName,
          signal: details?.signal,
          scope: { conversation, turn },
          conversation: { conversation },
          approvalScope: conversation,
          turn,
          ...(turn === null && found.ambiguous === true
            ? {
                turnUnknown: new CannotTellError(
                  'key',
                  `idempotent-tools/openai-agents: call ${toolCallId} of a run resumed from its saved state could be either of several calls of this conversation: its model's calls carry no item id, its provider numbers call ids (call_0 again in a later turn), and more than one turn asked approval for this call id with these arguments. ` +
                    'Nothing the tool is given tells which of them this run is, and a guess could hand one call the other\'s result, so it did not run. Give the tool a business key: { key: (input) => `order-${input.orderId}` }, or use a model whose responses carry ids (the Responses API).',
                ),
              }
            : turn === null
            ? {
                turnUnknown: new CannotTellError(
                  'key',
                  `idempotent-tools/openai-agents: call ${toolCallId} came from a model whose calls carry no item id, its id is one the provider numbers, and nothing minted its turn (idempotentTools mints one when the Runner asks needsApproval; this per-tool idempotentTool sees no new call): ` +
                    'providers restart call ids every turn, so the id alone would replay an earlier turn\'s result. Wrap the agent\'s tools with idempotentTools(tools, { scope }), or give the tool a business key: { key: (input) => `order-${input.orderId}` }.',
                ),
              }
            : {}),
        };
      },
      approvals: {
        // The run's own decision (RunState approve/reject, kept in its RunContext): approved
        // calls run; a rejected one is never run by the Runner, but is refused here too.
        reported: (input, [runContext, details], site) => {
          const toolName = site.toolName;
          if (toolName === undefined || typeof runContext?.isToolApproved !== 'function') return [];
          const approved = runContext.isToolApproved({ toolName, callId: site.toolCallId });
          if (approved === undefined) return [];
          const args = modelArguments(details) ?? input;
          if (approved) return [{ toolCallId: site.toolCallId, toolName, args, decision: 'approve', turn: site.turn ?? null }];
          const reason = typeof runContext.getRejectionMessage === 'function' ? runContext.getRejectionMessage(toolName, site.toolCallId) : undefined;
          return [{ toolCallId: site.toolCallId, toolName, args, decision: 'reject', turn: site.turn ?? null, reason }];
        },
        args: (input, [, details]) => modelArguments(details) ?? input,
        // The SDK's own answers: its rejection text (or the reason given), or what happened.
        refused: (refusal) => (refusal.kind === 'rejected' ? (refusal.reason ?? REJECTION_MESSAGE) : refusal.error.message),
      },
  };
}

/** What `tool()` from `@openai/agents` makes: the parts this helper reads and replaces. */
export interface FunctionToolLike {
  type: string;
  name: string;
  invoke: (runContext: any, input: string, details?: any) => Promise<unknown>;
}

/** The options of `idempotentTools`: every tool's options (scope required), and per-tool choices. */
export type OpenAiAgentsToolSetOptions<C = any> = Omit<OpenAiAgentsToolOptions<any, unknown, C>, 'name'> &
  ToolSetChoices<Partial<OpenAiAgentsToolOptions<any, unknown, C>>>;

/**
 * What the Agents SDK's default `errorFunction` makes of a throw: "An error occurred while
 * running the tool. Please try again." (0.20: without the error; earlier versions add
 * " Error: <error>"). The model gets it, and the call is recorded as failed (so the next
 * call runs again), not as a result to replay.
 */
const DEFAULT_ERROR = 'An error occurred while running the tool. Please try again.';
const DEFAULT_ERROR_PREFIX = `${DEFAULT_ERROR} Error: `;
function defaultErrorOutput(result: unknown): string | undefined {
  if (typeof result !== 'string') return undefined;
  if (result === DEFAULT_ERROR) return 'the tool threw (the SDK\'s default errorFunction does not say what)';
  return result.startsWith(DEFAULT_ERROR_PREFIX) ? result.slice(DEFAULT_ERROR_PREFIX.length) : undefined;
}

/**
 * Wraps every function tool of an agent's `tools` array (what `tool()` returns): each one's
 * `invoke` runs inside its record, keyed by the scope, the call id and the parsed input;
 * other tools (hosted tools, computer, shell), the tools in `readOnly` and those with
 * `tools: { name: false }` are left as they are. The per-tool `timeoutMs` stays outside the
 * guard: a call that timed out keeps running, and the model's next call under the same
 * business key (`key`) waits for it and gets its result. Returns a new array.
 */
export function idempotentTools<T extends readonly unknown[], C = any>(tools: T, options: OpenAiAgentsToolSetOptions<C>): T {
  const where = 'idempotent-tools/openai-agents';
  if (!Array.isArray(tools)) throw new TypeError(`${where}: idempotentTools(tools, options) takes an agent's tools array, not ${describe(tools)}`);
  const isFunctionTool = (t: unknown): t is FunctionToolLike =>
    t !== null && typeof t === 'object' && (t as FunctionToolLike).type === 'function' && typeof (t as FunctionToolLike).invoke === 'function' && typeof (t as FunctionToolLike).name === 'string';
  const names = tools.filter(isFunctionTool).map((t) => t.name);
  const optionsOf = toolSetOptions<OpenAiAgentsToolOptions<any, unknown, C>>(where, names, options);
  return tools.map((t) => {
    if (!isFunctionTool(t)) return t;
    const own = optionsOf(t.name);
    if (own === undefined) return t;
    const { scope, ...rest } = own;
    if (scope === undefined || scope === null || scope === '') {
      throw new TypeError(`${where}: tool "${t.name}": idempotentTools() needs a "scope" option (it is ${describe(scope)}). Call ids repeat across conversations; ${HINT}`);
    }
    const invoke = t.invoke;
    const storeOf = () => (rest.store as Store | undefined) ?? defaultStore();
    type Rest = [RunContextLike<C>, ToolCallDetailsLike | undefined, string];
    // The key is made from the parsed input (so {"a":1,"b":2} and {"b":2,"a":1} are one call);
    // the tool gets the JSON text the model sent, as before.
    // What the tool's own invoke threw (an abort, a raise_exception timeout) goes on as it was.
    const thrownByTool = new WeakSet<object>();
    const guarded = wrapToolCall<unknown, Rest, Promise<unknown>>(
      agentsFramework<unknown, Rest>(scope as Scope<[unknown, RunContextLike, ToolCallDetailsLike | undefined]>, storeOf, defaultErrorOutput, async (runContext, input, callId) => {
        const own = (t as FunctionToolLike & { needsApproval?: unknown }).needsApproval;
        return typeof own === 'function' ? Boolean(await own.call(t, runContext, input, callId)) : own === true;
      }),
      async function (this: unknown, _parsed: unknown, runContext: RunContextLike<C>, details: ToolCallDetailsLike | undefined, text: string) {
        try {
          return await invoke.call(t, runContext, text, details);
        } catch (err) {
          if (err !== null && typeof err === 'object') thrownByTool.add(err);
          throw err;
        }
      },
      rest as ToolHelperOptions<unknown, Promise<unknown>> & Record<string, unknown>,
    );
    return copyTool(t, {
      // Asked once per new call of the model: the turn of a call whose response has no id is minted here.
      needsApproval: mintingNeedsApproval(t as FunctionToolLike & { needsApproval?: unknown }, () => ({
        store: storeOf(),
        scope: scope as Scope<[unknown, RunContextLike, ToolCallDetailsLike | undefined]>,
        ttlMs: rest.ttlMs as number | undefined,
      })),
      invoke: async (runContext: RunContextLike<C>, input: string, details?: ToolCallDetailsLike) => {
        try {
          return await guarded(parsedInput(input), runContext, details, input);
        } catch (err) {
          // Our own errors (a key mismatch, a configuration error, the store) reach the model
          // as the SDK renders a tool's error, not as a failed run.
          if (err !== null && typeof err === 'object' && thrownByTool.has(err)) throw err;
          return `${DEFAULT_ERROR_PREFIX}${err instanceof Error ? err.toString() : String(err)}`;
        }
      },
    });
  }) as unknown as T;
}

/** The model's JSON arguments as data for the key; text that is not JSON is keyed as the text. */
function parsedInput(input: unknown): unknown {
  if (typeof input !== 'string') return input;
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}

/** The parts of a RunState `rejectToolCall` uses: `reject`, and the run's RunContext. */
export interface RunStateLike {
  reject(item: any, options?: { message?: string; alwaysReject?: boolean }): void;
  /** The run's RunContext (what every tool of the run gets). */
  _context?: unknown;
}

/** The parts of an interruption (`RunToolApprovalItem`) `rejectToolCall` reads. */
export interface ToolApprovalItemLike {
  rawItem?: { type?: string; callId?: string; id?: string; name?: string; arguments?: string } | unknown;
}

/** What `rejectToolCall` takes besides the state and the item. */
export interface RejectToolCallOptions<C = any> {
  /** The conversation, as the tools' `scope` option gives it: the same value or function. */
  scope: Scope<[any, RunContextLike<C>, ToolCallDetailsLike | undefined]>;
  /** The tools' store. Default: `defaultStore()`. */
  store?: Store;
  /** The rejection's message: the model gets it (as `state.reject` passes it on), and the record keeps it. */
  message?: string;
  /** Who rejected. */
  by?: string;
  /** Forget the decision this long after it was recorded. */
  ttlMs?: number;
}

/**
 * `await rejectToolCall(state, item, { scope, message })` instead of
 * `state.reject(item, { message })`: records the rejection, bound to the call (its scope,
 * turn, call id and tool), then rejects it in the run. The Runner never runs a rejected
 * call, so the guarded tool never sees the rejection; recorded, it is final: a copy of
 * the run saved before it, resumed and approved (in this process or another), does not
 * run the call. Another decision recorded for the call first is an `ApprovalConflictError`
 * (and nothing is rejected).
 */
export async function rejectToolCall<C = any>(state: RunStateLike, item: ToolApprovalItemLike, options: RejectToolCallOptions<C>): Promise<void> {
  const where = 'idempotent-tools/openai-agents: rejectToolCall(state, item, { scope })';
  if (state === null || typeof state !== 'object' || typeof state.reject !== 'function') {
    throw new TypeError(`${where}: state must be the RunState whose interruption this is (result.state), not ${describe(state)}`);
  }
  if (options === null || typeof options !== 'object') throw new TypeError(`${where}: options must be an object such as { scope, message }, not ${describe(options)}`);
  const raw = (item as { rawItem?: { callId?: unknown; id?: unknown; name?: unknown; arguments?: unknown } } | null)?.rawItem;
  const toolCallId = idOf(raw?.callId);
  if (toolCallId === undefined || typeof raw?.name !== 'string' || raw.name === '') {
    throw new TypeError(`${where}: item must be one of the run's interruptions (result.interruptions), a function tool call with rawItem.callId and rawItem.name`);
  }
  const details: ToolCallDetailsLike = { toolCall: raw as ToolCallDetailsLike['toolCall'] };
  const args = modelArguments(details);
  const runContext = state._context as RunContextLike<C>;
  const scope = resolveScope('openai-agents', options.scope, [args, runContext, details], HINT);
  const store = options.store ?? defaultStore();
  const found = await agentsTurn(runContext, raw as { id?: unknown }, raw.name, toolCallId, () => ({ store, key: turnChain(scope, raw.name as string, toolCallId) }), false, true, args);
  if (found.ambiguous === true) {
    // Recorded for no turn, the rejection would stand for the other call too; for a guessed one, maybe for the wrong call.
    throw new CannotTellError(
      'key',
      `${where}: call ${toolCallId} of this saved run could be either of several calls of the conversation (no item ids, a numbered call id, the same arguments asked for approval in more than one turn), so the rejection was not recorded and the run was not changed. ` +
        'Give the tool a business key ({ key: (input) => ... }), or reject in the run that made the call, before it is saved and resumed elsewhere.',
    );
  }
  const { turn } = found;
  await recordApproval(store, {
    scope,
    toolCallId,
    toolName: raw.name,
    ...(args === undefined ? {} : { args }),
    decision: 'reject',
    turn,
    ...(options.by === undefined ? {} : { by: options.by }),
    ...(options.message === undefined ? {} : { reason: options.message }),
    ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }),
  });
  state.reject(item, options.message === undefined ? undefined : { message: options.message });
}
