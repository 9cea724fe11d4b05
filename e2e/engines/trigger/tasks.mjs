// The Trigger.dev tasks of trigger.test.mjs: run() charges through idempotentStep (the package)
// and plainly (the control), each side effect written to the ledger. DIE=<point> freezes the
// process there (the test kills it with SIGKILL).
import { writeSync } from 'node:fs';

import { task } from '@trigger.dev/sdk';
import { currentKey, idempotentStep } from 'idempotent-tools/trigger';

import { ledgerEntries, recordSideEffect } from '../harness.mjs';

const die = () => process.env.DIE ?? '';

function freeze(line) {
  writeSync(1, `${line}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

function charge(label, extra = {}) {
  const { LEDGER } = process.env;
  recordSideEffect(LEDGER, { label, key: currentKey() ?? null, ...extra });
  return `charged ${label} #${ledgerEntries(LEDGER).filter((e) => e.label === label).length}`;
}

// The default store: IDEMPOTENT_TOOLS_DB names the test's SQLite file.
const chargeCard = idempotentStep(async function chargeCard(label) {
  const r = charge(label);
  if (die() === 'in-side-effect') freeze('charged');
  return r;
}, {
  leaseMs: 2000,
  reconcile: ({ key }) => {
    const seen = ledgerEntries(process.env.LEDGER).find((e) => e.key === key);
    return seen ? { happened: true, result: `reconciled ${seen.label}` } : { happened: false };
  },
});
const chargeOnce = idempotentStep(async function chargeOnce(label, i) {
  return charge(label, { i });
});
const sendReceipt = idempotentStep(async function sendReceipt(label) {
  return charge(label);
});

// Each task's run function, as Trigger.dev calls it on every attempt (attempt.mjs calls it too).
export const runs = {};

runs.pay = async ({ id }) => {
    const a = await chargeCard(`pkg-${id}`);
    // After the side effect and its record, before the attempt ends (Trigger.dev records the run's output then).
    if (die() === 'after-record') freeze('recorded');
    const b = charge(`control-${id}`);
    if (die() === 'control') freeze('charged control');
    return [a, b];
};
export const pay = task({ id: 'pay', run: runs.pay });

runs.many = async ({ id }) => {
    const out = [await chargeOnce(`first-${id}`, 0), await sendReceipt(`receipt-${id}`)];
    for (let i = 0; i < 2; i++) out.push(await chargeOnce(`loop-${id}`, i));
    return out;
};
export const many = task({ id: 'many', run: runs.many });
