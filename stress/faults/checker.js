#!/usr/bin/env node
'use strict';
// The checker: reads a fault run's ledger (ledger.js) and the store's final records, and
// says whether what the callers saw and what the side effect did keep the promises of
// docs/guarantees-and-failure-modes.md. Each broken promise is a violation of a kind:
//
//   run-after-result   (a) a run of a key started after a caller had been given a result
//                          for it (in the same persistence epoch, see below)
//   overlap            (b) two runs of one key overlapped while both held live leases (a
//                          run's lease, as its caller believes it: from when its claim was
//                          sent, or a renewal that succeeded was sent, for leaseMs)
//   late-run               fn started when its own lease had already run out (the claim's
//                          reply came too late, a renewal never came): issue 28, item 1
//   two-completions    (c) two different runs' completions were both accepted
//   not-first-result   (c) a caller got a result that is not the recorded one (the first
//                          completion accepted, or the store's final record)
//   different-results  (c) callers of one key got results of different runs
//   takeover-forgotten     a run claimed as fresh (not a takeover) although an earlier claim
//                          of the key had run and not failed: issue 28, item 2
//   reconcile-skipped      a second run of a key whose callers all pass `reconcile` (which
//                          would have found the first run)
//   untyped-error      (d) an error that is neither one of ours (an IdempotencyError code)
//                          nor the function's own
//   false-message      (d) an error whose message is not true: a LeaseLostError for a run
//                          whose result was recorded; a StoreError that says fn did not run
//                          when it ran, or that a result "could not be recorded" when it was
//   hang               (e) a call that never ended (its process alive), or took longer than
//                          the bound; a worker that did not exit when asked
//   crash                  a worker that died by itself (not by the nemesis)
//
// Epochs: a Redis restarted without persistence forgets its records. The conductor writes
// an `epoch` line once the old server is dead; the promises (a), (b), (c) hold within an
// epoch, not across one. Reruns after a lossy restart are that restart's doing, not ours.
// An operator's clear of one key (the nemesis's `clear-key`) is an epoch of that key
// alone: an `epoch` line with `key`, written once the clear is answered, with `from`, when
// it was sent. The deletion happened somewhere in between, so a run or a result whose
// epoch the window leaves open (a call that spans it) is held to neither epoch's promises
// against the other's: lenient, never a false violation. A run's epoch runs from its
// claim's sending to its start; a result's, from its call's start to its answer.
//
//   node stress/faults/checker.js LEDGER_DIR [--finals finals.json] [--hang-bound-ms 30000]

const { readFileSync } = require('node:fs');

const OUR_CODES = new Set(['DUPLICATE_IN_FLIGHT', 'IN_FLIGHT_TIMEOUT', 'STORE_ERROR', 'LEASE_LOST']);

function group(map, key, make) {
  let v = map.get(key);
  if (v === undefined) map.set(key, (v = make()));
  return v;
}

/** Merges [from, to] intervals (sorted by from). */
function merge(intervals) {
  const out = [];
  for (const [a, b] of [...intervals].sort((x, y) => x[0] - y[0])) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

function clip(intervals, from, to) {
  const out = [];
  for (const [a, b] of intervals) {
    const x = Math.max(a, from);
    const y = Math.min(b, to);
    if (x < y) out.push([x, y]);
  }
  return out;
}

function intersects(p, q) {
  for (const [a, b] of p) for (const [c, d] of q) if (a < d && c < b) return [Math.max(a, c), Math.min(b, d)];
  return undefined;
}

const ms = (x) => `${Math.round(x)} ms`;

/**
 * Checks the entries of a ledger (sorted by t). `finals`: key -> { status, run } as the
 * store holds it at the end (run: the completed result's run). `hangBoundMs`: the
 * longest a call may take, faults included.
 */
function check(entries, { finals = {}, hangBoundMs = 30_000 } = {}) {
  const violations = [];
  const add = (kind, detail) => violations.push({ kind, detail });
  const endT = entries.length ? entries[entries.length - 1].t : 0;

  // A server's lossy restart starts a new epoch for every key; an operator's clear of one
  // key (an `epoch` line with `key`), for that key alone.
  const epochs = entries.filter((e) => e.ev === 'epoch' && e.key === undefined).map((e) => ({ from: e.t, done: e.t }));
  const keyEpochs = new Map();
  for (const e of entries) if (e.ev === 'epoch' && e.key !== undefined) group(keyEpochs, e.key, () => []).push({ from: e.from ?? e.t, done: e.t });
  const boundaries = (key) => [...epochs, ...(keyEpochs.get(key) ?? [])];
  /** The epochs an event of `key` between `t0` and `t1` may belong to: [lo, hi]. */
  const epochsOf = (key, t0, t1 = t0) => {
    let lo = 0;
    let hi = 0;
    for (const b of boundaries(key)) {
      if (b.done <= t0) lo++;
      if (b.from <= t1) hi++;
    }
    return { lo, hi };
  };
  /** The one epoch of `x` ({ lo, hi }), or undefined when it may be either side of a boundary. */
  const epochOf = (x) => (x.lo === x.hi ? x.lo : undefined);
  const sameEpoch = (x, y) => epochOf(x) !== undefined && epochOf(x) === epochOf(y);
  const lastEpochOf = (key) => boundaries(key).length;

  const calls = new Map();
  const callOf = (id) => group(calls, id, () => ({ id, acquires: [], renews: [], settles: [], runs: [], reconciles: [] }));
  const runs = new Map();
  const keys = new Map();
  const keyOf = (k) => group(keys, k, () => ({ runs: [], rets: [], calls: [], accepted: [] }));
  const killedAt = new Map();
  const counts = { calls: 0, runs: 0, results: 0, errors: {}, kills: 0, stops: 0, faults: 0, epochs: epochs.length, clears: [...keyEpochs.values()].reduce((n, l) => n + l.length, 0), reconciled: 0, takeovers: 0 };

  for (const e of entries) {
    switch (e.ev) {
      case 'call': {
        const c = callOf(e.call);
        Object.assign(c, { key: e.key, t: e.t, mode: e.mode, reconcile: e.reconcile, leaseMs: e.leaseMs, who: e.who });
        keyOf(e.key).calls.push(c);
        counts.calls++;
        break;
      }
      case 'acquire':
        if (e.call !== undefined) callOf(e.call).acquires.push(e);
        if (e.acquired && e.takenOver) counts.takeovers++;
        break;
      case 'renew':
        if (e.call !== undefined) callOf(e.call).renews.push(e);
        break;
      case 'settle':
        if (e.call !== undefined) callOf(e.call).settles.push(e);
        if (e.op === 'complete' && e.ok === true) keyOf(e.key).accepted.push({ run: e.run, t: e.t, call: e.call });
        break;
      case 'run': {
        const r = { id: e.run, call: e.call, key: e.key, t: e.t, worker: e.run.slice(0, e.run.lastIndexOf('.')), ...epochsOf(e.key, e.t) };
        runs.set(e.run, r);
        keyOf(e.key).runs.push(r);
        callOf(e.call).runs.push(r);
        counts.runs++;
        break;
      }
      case 'run-end': {
        const r = runs.get(e.run);
        if (r) Object.assign(r, { end: e.t, threw: e.threw });
        break;
      }
      case 'reconcile':
        if (e.call !== undefined) callOf(e.call).reconciles.push(e);
        if (e.happened) counts.reconciled++;
        break;
      case 'ret':
      case 'err': {
        const c = callOf(e.call);
        c.end = e;
        if (e.ev === 'ret') {
          keyOf(e.key).rets.push({ ...e, ...epochsOf(e.key, c.t ?? e.t, e.t), call: c });
          counts.results++;
        } else {
          const code = e.code ?? e.name;
          counts.errors[code] = (counts.errors[code] ?? 0) + 1;
        }
        break;
      }
      case 'kill':
        killedAt.set(e.worker, e.t);
        counts.kills++;
        break;
      case 'stop':
        counts.stops++;
        break;
      case 'fault':
        if (e.what !== 'clear-key') counts.faults++; // clears are counted by their epochs
        break;
      case 'worker-hung':
        add('hang', `worker ${e.worker} did not exit within ${ms(e.waitedMs)} of being asked to stop`);
        break;
      case 'worker-crash':
        add('crash', `worker ${e.worker}: ${e.how}`);
        break;
      default:
    }
  }

  // When each run ended: its run-end, or its worker's death, or (never) the end of the ledger.
  for (const r of runs.values()) {
    if (r.end === undefined) {
      const k = killedAt.get(r.worker);
      r.end = k !== undefined && k >= r.t ? k : endT;
    }
  }

  // The lease each run believed it held: its call's claim (the last one acquired before
  // the run) and the renewals of that claim that succeeded, each good for leaseMs from
  // when it was sent.
  for (const r of runs.values()) {
    const c = calls.get(r.call);
    const claim = c?.acquires.filter((a) => a.acquired && a.t <= r.t).pop();
    if (claim === undefined) continue; // no store recorder (the naive control): no lease to judge
    r.claim = claim;
    Object.assign(r, epochsOf(r.key, claim.sent, r.t));
    const lease = claim.leaseMs ?? c.leaseMs;
    const grants = [claim.sent, ...c.renews.filter((n) => n.held === true && n.token === claim.token && n.sent >= claim.sent).map((n) => n.sent)];
    r.lease = merge(grants.map((g) => [g, g + lease]));
    r.live = clip(r.lease, r.t, r.end);
    const heldAtStart = grants.filter((g) => g <= r.t).reduce((m, g) => Math.max(m, g + lease), -Infinity);
    if (r.t > heldAtStart) {
      add('late-run', `${r.key}: run ${r.id} (call ${r.call}) started ${ms(r.t - heldAtStart)} after its lease ran out (claim sent ${ms(r.t - claim.sent)} before the run, lease ${lease} ms)`);
    }
  }

  const recordedRuns = new Set(); // runs whose result some caller got, or that were accepted or final
  for (const [key, k] of keys) {
    for (const a of k.accepted) recordedRuns.add(a.run);
    for (const r of k.rets) recordedRuns.add(r.run);
    const f = finals[key];
    if (f?.status === 'completed' && f.run !== undefined) recordedRuns.add(f.run);
  }

  for (const [key, k] of keys) {
    // (a) no run after a result was seen, in the same epoch.
    for (const r of k.runs) {
      const seen = k.rets.find((x) => x.t < r.t && sameEpoch(x, r));
      if (seen) add('run-after-result', `${key}: run ${r.id} (call ${r.call}) started ${ms(r.t - seen.t)} after call ${seen.call.id} was given run ${seen.run}'s result`);
    }
    // (b) no two runs overlapping while both held live leases, in one epoch.
    for (let i = 0; i < k.runs.length; i++) {
      for (let j = i + 1; j < k.runs.length; j++) {
        const p = k.runs[i];
        const q = k.runs[j];
        if (p.call === q.call || !sameEpoch(p, q) || !p.live || !q.live) continue;
        const both = intersects(p.live, q.live);
        if (both) add('overlap', `${key}: runs ${p.id} and ${q.id} both ran with live leases for ${ms(both[1] - both[0])}`);
      }
    }
    // (c) one completion per epoch, and every result the recorded one.
    // A completion belongs to its run's claim's epoch.
    for (const a of k.accepted) {
      const r = runs.get(a.run);
      Object.assign(a, r ? { lo: r.lo, hi: r.hi } : epochsOf(key, a.t));
    }
    const acceptedBy = new Map();
    for (const a of k.accepted) {
      const epoch = epochOf(a);
      if (epoch === undefined) continue;
      const first = acceptedBy.get(epoch);
      if (first === undefined) acceptedBy.set(epoch, a);
      else if (first.run !== a.run) add('two-completions', `${key}: the completions of run ${first.run} and of run ${a.run} were both accepted`);
    }
    const lastEpoch = lastEpochOf(key);
    const final = finals[key]?.status === 'completed' ? finals[key].run : undefined;
    if (final !== undefined && acceptedBy.has(lastEpoch) && acceptedBy.get(lastEpoch).run !== final) {
      add('not-first-result', `${key}: the store's final record holds run ${final}, but run ${acceptedBy.get(lastEpoch).run}'s completion was accepted first`);
    }
    const firstRet = new Map();
    for (const x of k.rets) {
      if (!runs.has(x.run)) add('not-first-result', `${key}: call ${x.call.id} got run ${x.run}, which no side effect made`);
      // The recorded result of each epoch the call spans (its first completion), and any
      // completion whose own epoch a clear's window leaves open.
      const acceptedRuns = [];
      for (let ep = x.lo; ep <= x.hi; ep++) if (acceptedBy.has(ep)) acceptedRuns.push(acceptedBy.get(ep).run);
      for (const a of k.accepted) if (epochOf(a) === undefined && a.lo <= x.hi && x.lo <= a.hi) acceptedRuns.push(a.run);
      if (x.hi === lastEpoch && final !== undefined) acceptedRuns.push(final);
      if (acceptedRuns.length > 0 && !acceptedRuns.includes(x.run)) {
        add('not-first-result', `${key}: call ${x.call.id} got run ${x.run}, but the recorded result is run ${acceptedRuns.join(' / ')}`);
      }
      // Callers of one epoch (sent and answered in it) all got one run: reported once per
      // other run given out.
      if (epochOf(x) === undefined) continue;
      const given = group(firstRet, epochOf(x), () => new Map());
      if (given.size > 0 && !given.has(x.run)) {
        const [run, first] = given.entries().next().value;
        add('different-results', `${key}: call ${first.call.id} got run ${run}, call ${x.call.id} got run ${x.run}`);
      }
      if (!given.has(x.run)) given.set(x.run, x);
    }
    // A fresh claim (not a takeover) right after a claim of the key that ran and did not
    // fail: the record was pending, so this claim took it over and must say so (and ask
    // reconcile). Claims count in `attempts`, so the one before is attempts - 1.
    for (const r of k.runs) {
      if (!r.claim || r.claim.takenOver !== false || !(r.claim.attempts > 1)) continue;
      const before = k.runs.find((p) => p.claim && sameEpoch(p, r) && p.claim.attempts === r.claim.attempts - 1 && p.claim.t < r.claim.sent);
      if (before && before.threw !== true) {
        add('takeover-forgotten', `${key}: run ${r.id}'s claim (attempts ${r.claim.attempts}) was answered as a fresh claim, but the claim before it (run ${before.id}, call ${before.call}) had run and not failed`);
      }
    }
    // Keys whose every caller reconciles: one run per epoch (runs after a declined one aside).
    if (k.calls.length > 0 && k.calls.every((c) => c.reconcile)) {
      const byEpoch = new Map();
      for (const r of k.runs) {
        const epoch = epochOf(r);
        if (epoch === undefined) continue;
        const prev = byEpoch.get(epoch);
        if (prev && prev.threw !== true) add('reconcile-skipped', `${key}: run ${r.id} (call ${r.call}) ran although run ${prev.id} had run before it and every caller passes reconcile`);
        byEpoch.set(epoch, r);
      }
    }
  }

  // (d) every error one of ours, or the function's own, with a true message; (e) no hang.
  for (const c of calls.values()) {
    if (c.t === undefined) continue; // store lines of a call whose `call` line a kill cut off
    const e = c.end;
    if (e === undefined) {
      const killed = killedAt.get(c.who);
      if (killed === undefined || killed < c.t) add('hang', `call ${c.id} (${c.key}) never ended, and its worker was not killed`);
      continue;
    }
    if (e.t - c.t > hangBoundMs) add('hang', `call ${c.id} (${c.key}) took ${ms(e.t - c.t)} (bound ${ms(hangBoundMs)})`);
    if (e.ev !== 'err') continue;
    const own = c.runs;
    const what = `call ${c.id} (${c.key}) got ${e.name}${e.code ? ` ${e.code}` : ''}`;
    if (e.name === 'DeclinedError') {
      if (!own.some((r) => r.id === e.run && r.threw === true)) add('false-message', `${what} naming run ${e.run}, which is not a declined run of this call`);
    } else if (!OUR_CODES.has(e.code)) {
      add('untyped-error', `${what}: ${e.message}`);
    } else if (e.code === 'LEASE_LOST') {
      // True when this call's own completion was refused. (Another call may still have
      // recorded this run's result: a takeover whose reconcile found it.)
      const r = own.find((x) => x.id === e.run);
      const mine = c.settles.find((x) => x.ok === true);
      const byOthers = keys.get(c.key).accepted.some((a) => a.run === e.run && a.call !== c.id);
      const final = finals[c.key];
      if (r === undefined) add('false-message', `${what} with error.result of run ${e.run}, which this call did not make`);
      else if (mine) add('false-message', `${what}, but its own ${mine.op} was accepted`);
      else if (final?.status === 'completed' && final.run === r.id && !byOthers && epochOf(r) === lastEpochOf(c.key)) {
        add('false-message', `${what}, but the store holds its run ${r.id}'s result, and no other call recorded it`);
      }
    } else if (e.code === 'STORE_ERROR') {
      const saysRan = /\bran, but\b/.test(e.message);
      if (saysRan && own.length === 0) add('false-message', `${what} saying it ran, but the side effect shows no run of this call: ${e.message}`);
      if (!saysRan && own.length > 0) add('false-message', `${what} saying nothing ran, but it ran (${own.map((r) => r.id).join(', ')}): ${e.message}`);
      if (saysRan && /could not be recorded/.test(e.message)) {
        const kept = own.find((r) => recordedRuns.has(r.id));
        if (kept) add('false-message', `${what} saying its result could not be recorded, but run ${kept.id}'s result was recorded: ${e.message}`);
      }
    }
  }

  const byKind = {};
  for (const v of violations) byKind[v.kind] = (byKind[v.kind] ?? 0) + 1;
  return { clean: violations.length === 0, violations, byKind, counts };
}

/** The one-line verdict. */
function verdictLine(label, result) {
  const c = result.counts;
  const errors = Object.entries(c.errors).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  const facts = `${c.calls} calls, ${c.runs} runs, ${c.results} results, ${c.takeovers} takeovers, ${c.reconciled} reconciled; errors: ${errors}; ` +
    `nemesis: ${c.kills} kills, ${c.stops} stops, ${c.faults} store faults, ${c.epochs} lossy restarts, ${c.clears} keys cleared`;
  if (result.clean) return `${label}: CLEAN (${facts})`;
  const kinds = Object.entries(result.byKind).map(([k, n]) => `${k} ${n}`).join(', ');
  return `${label}: ${result.violations.length} violations (${kinds}) (${facts})`;
}

/** The details of each violation, at most `limit` per kind. */
function details(result, limit = 10) {
  const shown = {};
  const lines = [];
  for (const v of result.violations) {
    shown[v.kind] = (shown[v.kind] ?? 0) + 1;
    if (shown[v.kind] <= limit) lines.push(`  ${v.kind}: ${v.detail}`);
    else if (shown[v.kind] === limit + 1) lines.push(`  ${v.kind}: ... (${result.byKind[v.kind] - limit} more)`);
  }
  return lines;
}

module.exports = { check, details, verdictLine };

if (require.main === module) {
  const { parseArgs } = require('node:util');
  const { readLedger } = require('./ledger');
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { finals: { type: 'string' }, 'hang-bound-ms': { type: 'string', default: '30000' } },
  });
  if (positionals.length !== 1) {
    console.error('usage: node stress/faults/checker.js LEDGER_DIR [--finals finals.json] [--hang-bound-ms 30000]');
    process.exit(2);
  }
  const { entries, torn } = readLedger(positionals[0]);
  const finals = values.finals ? JSON.parse(readFileSync(values.finals, 'utf8')) : {};
  const result = check(entries, { finals, hangBoundMs: Number(values['hang-bound-ms']) });
  console.log(verdictLine(positionals[0], result) + (torn ? ` (${torn} torn lines ignored)` : ''));
  for (const line of details(result)) console.log(line);
  process.exitCode = result.clean ? 0 : 1;
}
