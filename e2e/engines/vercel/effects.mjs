// The side effects of vercel.test.mjs's steps (steps.mjs): they charge through idempotentStep (the package)
// and plainly (the control), each side effect written to the ledger. DIE=<point> freezes the
// server there (the test kills it with SIGKILL); the next server's world re-queues the run.
import { writeSync } from 'node:fs';

import { currentKey, idempotentStep } from 'idempotent-tools/workflow';

import { ledgerEntries, recordSideEffect } from '../harness.mjs';

export function freeze(line) {
  writeSync(1, `${line}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

export function charge(label, extra = {}) {
  const { LEDGER } = process.env;
  recordSideEffect(LEDGER, { label, key: currentKey() ?? null, ...extra });
  return `charged ${label} #${ledgerEntries(LEDGER).filter((e) => e.label === label).length}`;
}

// The default store: IDEMPOTENT_TOOLS_DB names the test's SQLite file.
export const chargeCard = idempotentStep(async function chargeCard(label) {
  const r = charge(label);
  if (process.env.DIE === 'in-side-effect') freeze('charged');
  return r;
}, {
  leaseMs: 2000,
  reconcile: ({ key }) => {
    const seen = ledgerEntries(process.env.LEDGER).find((e) => e.key === key);
    return seen ? { happened: true, result: `reconciled ${seen.label}` } : { happened: false };
  },
});
export const chargeOnce = idempotentStep(async function chargeOnce(label, i) {
  return charge(label, { i });
});

