'use strict';
// The identity checker: given a scenario (which calls were meant, by whom), what the model
// emitted in each delivery, the ledger's side effects, and what each caller was handed
// back, says whether every helper kept "each caller apart, each call its own record":
//
//   ran-twice              a meant call's side effect happened more than once
//   never-ran              a call meant to run got no side effect, and no delivery of it was refused
//   result-without-run     a delivery was handed a result, but the call it meant never ran (a
//                          replay of another call: the model is told a side effect happened)
//   result-of-another-call a delivery was handed the result of another call of the same caller
//   result-crossed-callers a delivery was handed the result of another caller's call
//   ran-rejected           a rejected call ran
//   wrong-args             an edited call ran with other arguments than the edited ones
//   unexplained-run        a side effect that no emitted call explains
//   needless-refusal       a call the helper could tell was refused (or failed with our error)
//   not-refused            a malformed call was not refused (it ran, or was handed a result)
//
//   check(scenario, deliveries, effects) -> { violations, counts }
// deliveries: [{delivery, emitted: [{meant, toolCallId, args, step?}], seen: [{meant, receipts, refused?, error?}]}]
//   `seen[].refused`: the helper's refusal (its code or message); `error`: any other error.

function check(scenario, deliveries, effects) {
  const violations = [];
  const add = (kind, detail) => violations.push({ kind, ...detail });
  const meant = scenario.meant;
  const byDelivery = new Map(deliveries.map((d) => [d.delivery, d]));

  // Which meant call each side effect was: its delivery's emitted call with its tool call id
  // (and its arguments, when two emitted calls share an id).
  const effectsOf = new Map();
  const receiptOwner = new Map();
  for (const e of effects) {
    const d = byDelivery.get(e.delivery);
    const emitted = d?.emitted ?? [];
    let candidates = emitted.filter(
      (c) => (e.toolCallId == null || c.toolCallId == null || c.toolCallId === e.toolCallId) && (e.step === undefined || c.step === undefined || c.step === e.step),
    );
    if (candidates.length > 1) {
      const same = candidates.filter((c) => sameJson(c.args, e.args) || sameJson(meant[c.meant]?.edited, e.args));
      if (same.length > 0) candidates = same;
    }
    if (candidates.length !== 1) {
      add('unexplained-run', { delivery: e.delivery, toolCallId: e.toolCallId, args: e.args, receipt: e.receipt, candidates: candidates.map((c) => c.meant) });
      continue;
    }
    const m = candidates[0].meant;
    receiptOwner.set(e.receipt, m);
    const list = effectsOf.get(m) ?? [];
    list.push(e);
    effectsOf.set(m, list);
  }

  const refusedOf = new Map();
  const handedOf = new Map();
  for (const d of deliveries) {
    for (const s of d.seen) {
      if (s.refused !== undefined) refusedOf.set(s.meant, (refusedOf.get(s.meant) ?? 0) + 1);
      for (const r of s.receipts ?? []) {
        handedOf.set(s.meant, (handedOf.get(s.meant) ?? 0) + 1);
        const owner = receiptOwner.get(r);
        const m = meant[s.meant];
        if (owner === undefined) continue; // an unexplained run, reported above
        if (owner === s.meant) continue;
        if (meant[owner].caller !== m.caller) add('result-crossed-callers', { delivery: d.delivery, meant: s.meant, caller: m.caller, got: owner, of: meant[owner].caller });
        else add('result-of-another-call', { delivery: d.delivery, meant: s.meant, got: owner });
      }
      const m = meant[s.meant];
      if (m === undefined) continue;
      if (m.expect === 'run' && (s.refused !== undefined || s.error !== undefined)) {
        add('needless-refusal', { delivery: d.delivery, meant: s.meant, refused: s.refused, error: s.error });
      }
      if (m.expect === 'refused' && s.refused === undefined && (s.receipts ?? []).length > 0) add('not-refused', { delivery: d.delivery, meant: s.meant });
    }
  }

  for (const [id, m] of Object.entries(meant)) {
    const ran = effectsOf.get(id) ?? [];
    const delivered = deliveries.some((d) => d.emitted.some((c) => c.meant === id));
    if (!delivered) continue;
    if (m.expect === 'rejected') {
      if (ran.length > 0) add('ran-rejected', { meant: id, runs: ran.length });
      continue;
    }
    if (m.expect === 'refused') {
      if (ran.length > 0) add('not-refused', { meant: id, runs: ran.length });
      continue;
    }
    if (ran.length > 1) add('ran-twice', { meant: id, runs: ran.length, deliveries: ran.map((e) => e.delivery) });
    if (ran.length === 0) {
      if ((handedOf.get(id) ?? 0) > 0) add('result-without-run', { meant: id });
      else if ((refusedOf.get(id) ?? 0) === 0) add('never-ran', { meant: id });
    }
    if (m.edited !== undefined) for (const e of ran) if (!sameJson(e.args, m.edited)) add('wrong-args', { meant: id, ran: e.args, edited: m.edited });
  }

  const counts = {
    meant: Object.keys(meant).length,
    deliveries: deliveries.length,
    effects: effects.length,
    refusals: [...refusedOf.values()].reduce((a, b) => a + b, 0),
  };
  return { violations, counts };
}

function sameJson(a, b) {
  if (a === undefined || b === undefined) return false;
  return canonical(a) === canonical(b);
}

function canonical(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
}

/** One line per kind: how many, and the first one. */
function summary(violations) {
  const kinds = new Map();
  for (const v of violations) {
    const k = kinds.get(v.kind) ?? { n: 0, first: v };
    k.n++;
    kinds.set(v.kind, k);
  }
  return [...kinds].map(([kind, { n, first }]) => `${kind} x${n} (first: ${JSON.stringify(first)})`);
}

module.exports = { check, summary };
