// A Restate service for restate.test.mjs: each handler charges through idempotentRun (the
// package) and through a plain ctx.run (the control), writing each side effect to the ledger.
// DIE=<point> freezes the process at that point (the test kills it there with SIGKILL).
import { writeSync } from 'node:fs';

import * as restate from '@restatedev/restate-sdk';
import { SqliteStore } from 'idempotent-tools';
import { currentKey, idempotentRun } from 'idempotent-tools/restate';

import { ledgerEntries, recordSideEffect } from '../harness.mjs';

const { LEDGER, STORE, PORT, DIE = '' } = process.env;
const store = new SqliteStore({ path: STORE });

/** Prints a line, then stops this process's event loop: nothing more reaches Restate until the test kills it. */
function freeze(line) {
  writeSync(1, `${line}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

function charge(label, extra = {}) {
  const entry = { label, key: currentKey() ?? null, ...extra };
  recordSideEffect(LEDGER, entry);
  return `charged ${label} #${ledgerEntries(LEDGER).filter((e) => e.label === label).length}`;
}

// The lease follows the retry: a dead attempt's claim lapses 2 s after its last renewal.
const options = {
  store,
  leaseMs: 2000,
  // Asked when the claim of a dead attempt is taken over: did the charge go out? The ledger
  // stands for the provider, searched by the key the dead attempt passed it (currentKey()).
  reconcile: ({ key }) => {
    const seen = ledgerEntries(LEDGER).find((e) => e.key === key);
    return seen ? { happened: true, result: `reconciled ${seen.label}` } : { happened: false };
  },
  // After the side effect is recorded (the package's record), before the run's result reaches Restate.
  onEvent: (e) => {
    if (e.type === 'executed' && DIE === 'after-record') freeze('recorded');
  },
};

const pay = restate.service({
  name: 'pay',
  handlers: {
    // The kill-and-retry case: once through the package, once more without it.
    async order(ctx, id) {
      const a = await idempotentRun(ctx, 'charge', () => {
        const r = charge(`pkg-${id}`);
        if (DIE === 'in-side-effect') freeze('charged');
        return r;
      }, options);
      const b = await ctx.run('control', () => {
        const r = charge(`control-${id}`);
        if (DIE === 'control') freeze('charged control');
        return r;
      });
      return [a, b];
    },
    // Two different runs, two iterations of one run name, and a second invocation: never one record.
    async many(ctx, id) {
      const out = [];
      out.push(await idempotentRun(ctx, 'first', () => charge(`first-${id}`), { store }));
      out.push(await idempotentRun(ctx, 'second', () => charge(`second-${id}`), { store }));
      for (let i = 0; i < 2; i++) out.push(await idempotentRun(ctx, 'loop', () => charge(`loop-${id}`, { i }), { store }));
      return out;
    },
  },
});

const port = await restate.endpoint().bind(pay).listen(Number(PORT));
writeSync(1, `listening ${port}\n`);
