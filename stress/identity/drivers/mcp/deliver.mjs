// The deliveries of a 'request' scenario (scenario.js), as an MCP client makes them: every
// ask is one tools/call per call (a step's parallel calls sent at once), on the caller's
// session; a resend sends the same requests again, params and all, on the session the
// scenario names (another session of the same caller: a reconnected client, a second
// window); a refresh replaces the caller's access token. Shared by the MCP drivers, which
// say how a session is opened (`open`) and what a refresh does (`refresh`).
//
// What the caller was handed for each call: the receipts in the tool's result; a JSON-RPC
// error answering a tools/call, or an `isError` result, is the guard's refusal (the harness's
// tool never fails, so nothing else answers so); a lost connection or a timeout is an error.

import { createRequire } from 'node:module';

import { TOOL_USE_ID } from './payments.mjs';

const require = createRequire(import.meta.url);
const { receiptsIn } = require('../../ledger.js');

/** The SDK client's own errors (connection closed, request timed out): not an answer of the server. */
const CLIENT_SIDE = new Set([-32000, -32001]);

/**
 * The params of one call's tools/call: the arguments, the runtime's tool call id in `_meta`
 * (`withToolUseId`), and the client's key where `keyAt(call)` says: `'meta'`
 * (`_meta.idempotencyKey`) or `'top'` (the top-level `idempotencyKey`, SEP-3182).
 */
export function paramsOf(call, { keyAt = () => 'meta', withToolUseId = true } = {}) {
  const meta = withToolUseId ? { [TOOL_USE_ID]: call.id } : {};
  const params = { name: 'pay', arguments: call.args };
  if (call.clientKey !== undefined) {
    if (keyAt(call) === 'top') params.idempotencyKey = call.clientKey;
    else meta.idempotencyKey = call.clientKey;
  }
  if (Object.keys(meta).length > 0) params._meta = meta;
  return params;
}

/** Each caller's access token: `tok-<caller>-<n>`, replaced by a refresh. */
export class Tokens {
  constructor() {
    this.current = new Map();
    this.subjects = new Map(); // valid token -> account
  }
  of(caller) {
    if (!this.current.has(caller)) this.issue(caller, 1);
    return this.current.get(caller);
  }
  issue(caller, n) {
    const token = `tok-${caller}-${n}`;
    this.current.set(caller, token);
    this.subjects.set(token, `acct-${caller}`);
  }
  refresh(caller) {
    const old = this.of(caller);
    this.subjects.delete(old); // revoked
    this.issue(caller, Number(old.split('-').pop()) + 1);
  }
  /** What a token verifier hands the server: the account as the subject (`withSub`), or only the token. */
  authInfo(token, withSub = true) {
    const sub = this.subjects.get(token);
    if (sub === undefined) return undefined;
    return { token, clientId: 'harness-app', scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600, ...(withSub ? { extra: { sub } } : {}) };
  }
}

/** What a caller saw for one call: `send(params)` resolves to the result or rejects with the error. */
async function seenFor(meant, send) {
  try {
    const result = await send();
    if (result?.isError === true) return { meant, receipts: receiptsIn(result), refused: textOf(result).slice(0, 300) };
    return { meant, receipts: receiptsIn(result) };
  } catch (err) {
    const code = err?.code;
    const text = `${code ?? ''} ${err?.message ?? err}`.trim().slice(0, 300);
    if (typeof code === 'number' && !CLIENT_SIDE.has(code)) return { meant, receipts: [], refused: text };
    return { meant, receipts: [], error: text };
  }
}

function textOf(result) {
  return (Array.isArray(result.content) ? result.content : []).map((c) => c?.text ?? '').join(' ');
}

/**
 * Makes a request scenario's deliveries, one at a time. `open(caller, session)` connects a
 * session and resolves to `{ send(params), close() }` (`send`: one tools/call);
 * `refresh(caller)` replaces the caller's token (optional). `params(call)`: how a call is
 * sent (paramsOf by default). Returns the deliveries for the checker.
 */
export async function deliverRequests(scenario, { ledger, open, refresh, params = (call) => paramsOf(call) }) {
  const sessions = new Map();
  const sessionOf = async (caller, name) => {
    let s = sessions.get(name);
    if (s === undefined) {
      s = await open(caller, name);
      sessions.set(name, s);
    }
    return s;
  };
  const requests = new Map(); // delivery -> { caller, session, calls: [{ call, params }] }
  const deliveries = [];
  try {
    // Every session the scenario uses, connected at once (a child process starts slowly).
    const callerOf = new Map();
    const used = new Map();
    for (const e of scenario.events) {
      if (e.op === 'ask') {
        callerOf.set(e.delivery, { caller: e.caller, session: e.session });
        used.set(e.session, e.caller);
      } else if (e.op === 'resend') {
        const of = callerOf.get(e.of);
        callerOf.set(e.delivery, of);
        used.set(e.session ?? of.session, of.caller);
      }
    }
    await Promise.all([...used].map(([session, caller]) => sessionOf(caller, session)));
    for (const event of scenario.events) {
      if (event.op === 'refresh') {
        await refresh?.(event.caller);
        continue;
      }
      let request;
      if (event.op === 'ask') {
        request = { caller: event.caller, session: event.session, calls: event.steps.flat().map((call) => ({ call, params: params(call) })) };
        requests.set(event.delivery, request);
      } else if (event.op === 'resend') {
        const of = requests.get(event.of);
        request = { ...of, session: event.session ?? of.session };
      } else continue;
      const session = await sessionOf(request.caller, request.session);
      ledger.setCurrent(event.delivery);
      const seen = await Promise.all(request.calls.map(({ call, params: p }) => seenFor(call.meant, () => session.send(structuredClone(p)))));
      ledger.setCurrent(null);
      deliveries.push({ delivery: event.delivery, emitted: request.calls.map(({ call }) => ({ meant: call.meant, toolCallId: call.id, args: call.args })), seen });
    }
  } finally {
    for (const s of sessions.values()) await s.close().catch(() => {});
  }
  return deliveries;
}
