'use strict';
// The callers of a fault run and the side effect they wrap, writing the ledger
// (ledger.js): the same code in the campaign's worker processes and in the deterministic
// tests (__test__/faults/).
//
// - recordingStore(store, ledger): the store as the library sees it, with every acquire,
//   renew, complete and fail written down (when it was sent, what came back), for the call
//   it belongs to. The checker derives from these the lease each run believed it held.
// - makeSideEffect(...): the wrapped function. Its first act is the side effect itself: a
//   `run` line in the effects file, fsync'd. Then it "works" (an await the test or the
//   campaign decides), writes `run-end` and returns { key, run }, or throws DeclinedError.
// - reconcileFromEffects(dir): a `reconcile` that looks for the key's runs in the effects
//   files, as a real one would ask the payment provider: the latest run found happened.
// - makeCall(...): one caller: writes `call`, calls, writes `ret` or `err`.

const { AsyncLocalStorage } = require('node:async_hooks');
const { readdirSync } = require('node:fs');
const { join } = require('node:path');

const { Ledger, eachLine, now } = require('./ledger');

/** Which call (of this process) the store is working for: set by makeCall. */
const callContext = new AsyncLocalStorage();

/** The function's own error: declined by the side effect (a card refused). */
class DeclinedError extends Error {
  constructor(run) {
    super(`declined by the side effect (run ${run})`);
    this.name = 'DeclinedError';
    this.run = run;
  }
}

const errorText = (err) => (err instanceof Error ? `${err.name}: ${err.message}` : String(err));

/**
 * `store` with its acquire, renew, complete and fail written to `ledger`. Everything else
 * (the native fast paths, symbols, close) goes to the store itself, as if unwrapped.
 */
function recordingStore(store, ledger) {
  const call = () => callContext.getStore()?.call;
  const logged = {
    acquire(request) {
      const sent = now();
      const c = call();
      return store.acquire(request).then(
        (r) => {
          ledger.write(
            r.acquired
              ? { ev: 'acquire', call: c, key: request.key, sent, leaseMs: request.leaseMs, acquired: true, takenOver: r.takenOver, attempts: r.attempts, token: r.token }
              : { ev: 'acquire', call: c, key: request.key, sent, acquired: false, status: r.record.status, attempts: r.record.attempts, run: r.record.result?.run },
          );
          return r;
        },
        (err) => {
          ledger.write({ ev: 'acquire-error', call: c, key: request.key, sent, message: errorText(err) });
          throw err;
        },
      );
    },
    renew(key, token, leaseMs) {
      const sent = now();
      const c = call();
      return store.renew(key, token, leaseMs).then(
        (held) => {
          ledger.write({ ev: 'renew', call: c, key, sent, token, leaseMs, held });
          return held;
        },
        (err) => {
          ledger.write({ ev: 'renew', call: c, key, sent, token, leaseMs, error: errorText(err) });
          throw err;
        },
      );
    },
  };
  for (const op of ['complete', 'fail']) {
    logged[op] = (request) => {
      const sent = now();
      const c = call();
      let run;
      try {
        run = request.resultJson === undefined ? undefined : JSON.parse(request.resultJson)?.run;
      } catch {
        run = undefined;
      }
      const base = { ev: 'settle', call: c, key: request.key, op, sent, token: request.token, run };
      return store[op](request).then(
        (ok) => {
          ledger.write({ ...base, ok });
          return ok;
        },
        (err) => {
          ledger.write({ ...base, error: errorText(err) });
          throw err;
        },
      );
    };
  }
  return new Proxy(store, {
    get(target, prop) {
      if (Object.prototype.hasOwnProperty.call(logged, prop) && typeof target[prop] === 'function') return logged[prop];
      // Getters and methods run on the store itself (its private fields are there).
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * The side effect. `work(run, key)`: what happens between the side effect and the return
 * (a promise; the campaign waits a random while, a test waits on its own gate). `decline(key)`:
 * true to throw DeclinedError instead of returning.
 */
function makeSideEffect({ dir, who, work = async () => {}, decline = () => false }) {
  const effects = new Ledger(dir, `effects-${who}`);
  let runs = 0;
  return async function faultEffect(key, callId) {
    const run = `${who}.${++runs}`;
    effects.write({ ev: 'run', call: callId, key, run }, { durable: true });
    await work(run, key);
    const threw = decline(key);
    effects.write({ ev: 'run-end', call: callId, key, run, threw }, { durable: true });
    if (threw) throw new DeclinedError(run);
    return { key, run };
  };
}

/** A `reconcile` that finds the key's runs in the effects files of `dir` (see above). */
function reconcileFromEffects(dir, ledger) {
  return async ({ key }) => {
    let latest;
    for (const name of readdirSync(dir)) {
      if (!name.startsWith('effects-')) continue;
      eachLine(join(dir, name), (line) => {
        if (!line.includes(JSON.stringify(key))) return;
        try {
          const e = JSON.parse(line);
          if (e.ev === 'run' && e.key === key && (latest === undefined || e.t > latest.t)) latest = e;
        } catch {
          // a line cut short by a kill
        }
      });
    }
    const call = callContext.getStore()?.call;
    ledger.write({ ev: 'reconcile', call, key, happened: latest !== undefined, run: latest?.run });
    return latest === undefined ? { happened: false } : { happened: true, result: { key, run: latest.run } };
  };
}

/**
 * One caller: `wrapped` is an idempotent() wrapper of the side effect (its payload the key
 * alone, so the call id is not part of the call's identity). Returns what the call gave:
 * { run } or { error }.
 */
async function makeCall({ ledger, wrapped, key, callId, mode, reconcile, leaseMs }) {
  ledger.write({ ev: 'call', call: callId, key, mode, reconcile: Boolean(reconcile), leaseMs });
  try {
    const result = await callContext.run({ call: callId }, () => wrapped.withKey(key)(key, callId));
    ledger.write({ ev: 'ret', call: callId, key, run: result?.run });
    return { run: result?.run };
  } catch (err) {
    const e = err ?? {};
    ledger.write({
      ev: 'err',
      call: callId,
      key,
      name: typeof e.name === 'string' ? e.name : typeof e,
      code: typeof e.code === 'string' ? e.code : undefined,
      message: typeof e.message === 'string' ? e.message : String(e),
      run: e.result?.run ?? e.run,
    });
    return { error: err };
  }
}

module.exports = { DeclinedError, callContext, makeCall, makeSideEffect, reconcileFromEffects, recordingStore };
