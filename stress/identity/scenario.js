'use strict';
// Scenarios for the identity harness: who calls, which calls they mean, and how each is
// delivered again. Generated from a seed, in the terms every driver translates into its
// framework's own (a request to generateText, a Runner turn, a tools/call):
//
//   ask     {delivery, caller, conv, steps: [[call, ...], ...], approval?}
//           the caller sends a new message in conversation `conv`; the model answers with
//           one or more steps, each with its calls: {meant, args, id}. `meant` names the
//           call the scenario means: a new one every time, even when its id or its
//           arguments repeat an earlier one's. approval (when the driver has approvals):
//           'approve' | 'edit' | 'reject' for every call of the ask. Such an ask answers in one
//           step, unless the driver's runtime goes on after the decisions (`approvalSteps`:
//           the OpenAI Agents Runner), whose later steps' calls are decided the same way.
//   resend  {delivery, of, flip?, via?} the request of delivery `of` sent again, as it was (a
//           retry, a double submit, a resumed or forked run, an approved history resubmitted,
//           a client that reconnected): its calls are the same calls, never new ones.
//           MCP: `session` may be another session of the same caller. `flip`: a rejected
//           ask's answer resubmitted as approved (the call must still never run). `via` (when
//           the driver names its ways to send again, capability `resends`): which one, such
//           as the Claude Agent SDK's 'resume', 'fork' and 'worker' (another worker resumes).
//   trim    {conv, keep}        from now on the conversation sends only its last `keep` messages
//   refresh {caller}            the caller's access token is replaced (MCP)
//
// Calls' ids follow the conversation's style: 'restart' (call_0, call_1 in every step, as
// providers that number their calls), 'unique' (a new random id), or 'counting' (call_0,
// call_1, ... through the conversation, never restarting in it, and again in every other
// conversation: a fake API or gateway that numbers a session's calls). Arguments come from a
// pool of two, so the same arguments are asked for again by other calls and other callers.
// A meant call's `expect`: 'run' (exactly once), 'rejected' (never), 'refused' (malformed:
// the helper refuses it, and only it).
//
// Kind 'request' (MCP: one tools/call per call, a step's parallel calls sent at once): an
// ask has one step and a `session` (`<caller>-s1`; a resend may name `<caller>-s2`). A call
// may carry the client's idempotency key (`clientKey`: k-1, k-2, ... per caller, so keys
// repeat across callers on purpose); one without a key is named by its arguments within its
// caller, so it gets its own (order-1, order-2, ... per caller: two callers ask for the same
// arguments, which are two calls). The malformed call is a key cut in the middle of an emoji.

const { createRandom } = require('../faults/proxy');

const ARGS = [
  { orderId: 'o-1', cents: 100 },
  { orderId: 'o-2', cents: 250 },
];
/** A business key cut in the middle of an emoji: a lone surrogate, which no store keeps. */
const MALFORMED = { orderId: 'o-\ud83d', cents: 100 };
/** A request's malformed call: a client's idempotency key cut in the middle of an emoji. */
const MALFORMED_KEY = 'k-\ud83d';

/**
 * What a driver can do, which decides what its scenarios hold. Every field optional.
 * @typedef {{ kind?: 'conversation' | 'request', callers?: number, multiStep?: boolean, parallel?: boolean,
 *   trim?: boolean, approvals?: Array<'approve' | 'edit' | 'reject'>, approvalSteps?: boolean, sessions?: boolean, refresh?: boolean,
 *   clientKeys?: boolean, malformed?: boolean, idStyles?: Array<'restart' | 'unique' | 'counting'>, idCycle?: boolean,
 *   resends?: string[], rates?: { approval?: number, parallel?: number } }} Capabilities
 * `rates`: how often an ask waits for approval (0.4) and a step makes two calls (0.3), for a
 * variant that must meet their combinations often (the same draws: other drivers' scenarios
 * do not change).
 */

function uniqueId(rand) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (let i = 0; i < 24; i++) s += alphabet[rand.int(0, alphabet.length - 1)];
  return `call_${s}`;
}

/**
 * One scenario: `events` events for a driver with these capabilities.
 * @param {number} seed
 * @param {Capabilities} caps
 */
function generate(seed, caps = {}, events = 12) {
  const rand = createRandom(seed);
  const kind = caps.kind ?? 'conversation';
  const callers = Array.from({ length: Math.max(1, caps.callers ?? 2) }, (_, i) => `u${i + 1}`);
  const styles = caps.idStyles ?? ['restart', 'unique'];
  const meant = {};
  const convs = [];
  const steps = [];
  const asks = [];
  let deliveries = 0;
  let meants = 0;
  const keysOf = new Map(); // MCP: a caller's client keys so far (a key names one call of its caller)
  const counts = new Map(); // 'counting' ids: a conversation's calls so far
  const counted = (conv) => {
    const n = counts.get(conv.id) ?? 0;
    counts.set(conv.id, n + 1);
    return n;
  };
  const keylessOf = new Map(); // MCP: how many calls a caller made without a key

  const newConv = (caller) => {
    // idCycle: the conversations take the styles in turn (c1 the first), so that every style is there.
    const style = caps.idCycle ? styles[convs.length % styles.length] : rand.pick(styles);
    const c = { id: `c${convs.length + 1}`, caller, style, session: `${caller}-s1` };
    convs.push(c);
    return c;
  };

  for (let n = 0; n < events; n++) {
    const roll = rand.next();
    if (asks.length > 0 && roll < 0.3) {
      // The same request again.
      const of = rand.pick(asks);
      const event = { op: 'resend', delivery: `d${++deliveries}`, of: of.delivery };
      // A rejection resubmitted with the decision flipped to approved: still never runs.
      if (of.approval === 'reject' && rand.next() < 0.5) event.flip = true;
      // Drawn only for a driver that names its ways: other drivers' scenarios stay as they were.
      if (caps.resends && caps.resends.length > 0) event.via = rand.pick(caps.resends);
      if (kind === 'request' && caps.sessions && rand.next() < 0.5) event.session = `${of.caller}-s2`;
      steps.push(event);
      continue;
    }
    if (kind === 'conversation' && caps.trim && convs.length > 0 && roll < 0.38) {
      steps.push({ op: 'trim', conv: rand.pick(convs).id, keep: rand.int(2, 6) });
      continue;
    }
    if (kind === 'request' && caps.refresh && roll < 0.38) {
      steps.push({ op: 'refresh', caller: rand.pick(callers) });
      continue;
    }
    // A new message: in a conversation of its own, or one of the caller's.
    const caller = rand.pick(callers);
    const own = convs.filter((c) => c.caller === caller);
    const conv = own.length > 0 && rand.next() < 0.7 ? rand.pick(own) : newConv(caller);
    const stepCount = kind === 'conversation' && caps.multiStep ? rand.int(1, 3) : 1;
    const modelSteps = [];
    // A request's malformed call is its client's key (a request kind without keys has none).
    const malformedAt = caps.malformed && (kind !== 'request' || caps.clientKeys) && rand.next() < 0.15 ? rand.int(0, stepCount - 1) : -1;
    for (let s = 0; s < stepCount; s++) {
      const count = caps.parallel && rand.next() < (caps.rates?.parallel ?? 0.3) ? 2 : 1;
      const calls = [];
      for (let i = 0; i < count; i++) {
        const id = `m${++meants}`;
        const bad = s === malformedAt && i === count - 1;
        let args = bad && kind !== 'request' ? MALFORMED : rand.pick(ARGS);
        const callId = conv.style === 'restart' ? `call_${i}` : conv.style === 'counting' ? `call_${counted(conv)}` : uniqueId(rand);
        const call = { meant: id, args, id: callId };
        if (kind === 'request') {
          // A client key: one per call of its caller (keys repeat across callers, on purpose).
          const keys = keysOf.get(caller) ?? [];
          if (bad) {
            // A key cut in the middle of an emoji (its arguments are well formed: a store keeps
            // any arguments exactly, as their digest; it cannot keep this key).
            call.clientKey = MALFORMED_KEY;
          } else if (caps.clientKeys && rand.next() < 0.6) {
            call.clientKey = `k-${keys.length + 1}`;
            keys.push(call.clientKey);
            keysOf.set(caller, keys);
          } else {
            // Without a key the arguments name the call within its caller: new ones for a new
            // call, counted per caller (order-1, order-2, ...), so that two callers ask for the
            // same arguments, which are two calls.
            const n = (keylessOf.get(caller) ?? 0) + 1;
            keylessOf.set(caller, n);
            args = { orderId: `order-${n}`, cents: ARGS[(n - 1) % ARGS.length].cents };
            call.args = args;
          }
        }
        meant[id] = { caller, conv: conv.id, args, expect: bad ? 'refused' : 'run' };
        calls.push(call);
      }
      modelSteps.push(calls);
    }
    const event = { op: 'ask', delivery: `d${++deliveries}`, caller, conv: conv.id, session: conv.session, steps: modelSteps };
    if (caps.approvals && caps.approvals.length > 0 && malformedAt === -1 && rand.next() < (caps.rates?.approval ?? 0.4)) {
      // An ask that waits for approval answers in one step: the calls of later steps are never
      // made; unless the runtime goes on after the decisions (approvalSteps: OpenAI Agents'
      // Runner), and then every call of the ask is decided the same way.
      if (!caps.approvalSteps) {
        for (const call of modelSteps.slice(1).flat()) delete meant[call.meant];
        modelSteps.length = 1;
      }
      event.approval = rand.pick(caps.approvals);
      for (const call of modelSteps.flat()) {
        if (event.approval === 'reject') meant[call.meant].expect = 'rejected';
        if (event.approval === 'edit') meant[call.meant].edited = { ...call.args, cents: call.args.cents + 1 };
      }
    }
    steps.push(event);
    asks.push(event);
  }
  return { seed, kind, callers, conversations: convs, meant, events: steps };
}

module.exports = { generate, ARGS, MALFORMED, MALFORMED_KEY };
