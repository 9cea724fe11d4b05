// The Inngest functions of inngest.test.mjs: steps that charge through idempotentStep (the
// package) and plainly (the control), each side effect written to the ledger. DIE=<point>
// freezes the process there (the test kills it with SIGKILL).
import { writeSync } from 'node:fs';

import { Inngest } from 'inngest';
import { currentKey, idempotentStep } from 'idempotent-tools/inngest';

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

export const inngest = new Inngest({ id: 'engines-e2e', isDev: true });

export const pay = inngest.createFunction({ id: 'pay', triggers: [{ event: 'order/pay' }] }, async ({ event, step }) => {
  const id = event.data.id;
  const a = await step.run('charge', async () => {
    const r = await chargeCard(`pkg-${id}`);
    // After the side effect and its record, before Inngest records the step.
    if (die() === 'after-record') freeze('recorded');
    return r;
  });
  const b = await step.run('control', async () => {
    const r = charge(`control-${id}`);
    if (die() === 'control') freeze('charged control');
    return r;
  });
  return [a, b];
});

export const many = inngest.createFunction({ id: 'many', triggers: [{ event: 'order/many' }] }, async ({ event, step }) => {
  const id = event.data.id;
  const out = [await step.run('first', () => chargeOnce(`first-${id}`, 0))];
  out.push(await step.run('second', async () => [await chargeOnce(`second-${id}`, 0), await chargeOnce(`second-${id}`, 1)]));
  for (let i = 0; i < 2; i++) out.push(await step.run('loop', () => chargeOnce(`loop-${id}`, i)));
  return out;
});
