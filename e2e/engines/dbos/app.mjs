// A DBOS application for dbos.test.mjs, on the local PostgreSQL: a workflow whose steps charge
// through idempotentStep (the package) and plainly (the control), each side effect written to
// the ledger. DIE=<point> freezes the process there (the test kills it with SIGKILL); on the
// next launch DBOS recovers the workflow and runs its unfinished step again.
import { writeSync } from 'node:fs';

import { DBOS } from '@dbos-inc/dbos-sdk';
import { SqliteStore } from 'idempotent-tools';
import { currentKey, idempotentStep } from 'idempotent-tools/dbos';

import { ledgerEntries, recordSideEffect } from '../harness.mjs';

const { LEDGER, STORE, DATABASE, DIE = '', START = '', WAIT = '' } = process.env;
const store = new SqliteStore({ path: STORE });

function freeze(line) {
  writeSync(1, `${line}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

function charge(label, extra = {}) {
  recordSideEffect(LEDGER, { label, key: currentKey() ?? null, ...extra });
  return `charged ${label} #${ledgerEntries(LEDGER).filter((e) => e.label === label).length}`;
}

const chargeCard = idempotentStep(async function chargeCard(label) {
  const r = charge(label);
  if (DIE === 'in-side-effect') freeze('charged');
  return r;
}, {
  store,
  leaseMs: 2000,
  reconcile: ({ key }) => {
    const seen = ledgerEntries(LEDGER).find((e) => e.key === key);
    return seen ? { happened: true, result: `reconciled ${seen.label}` } : { happened: false };
  },
});
const chargeOnce = idempotentStep(async function chargeOnce(label, i) {
  return charge(label, { i });
}, { store });

async function payFlow(id) {
  const a = await DBOS.runStep(async () => {
    const r = await chargeCard(`pkg-${id}`);
    // After the side effect and its record, before DBOS records the step.
    if (DIE === 'after-record') freeze('recorded');
    return r;
  }, { name: 'charge' });
  const b = await DBOS.runStep(async () => {
    const r = charge(`control-${id}`);
    if (DIE === 'control') freeze('charged control');
    return r;
  }, { name: 'control' });
  return [a, b];
}

async function manyFlow(id) {
  const out = [];
  out.push(await DBOS.runStep(() => chargeOnce(`first-${id}`, 0), { name: 'first' }));
  out.push(await DBOS.runStep(() => chargeOnce(`second-${id}`, 0), { name: 'second' }));
  for (let i = 0; i < 2; i++) out.push(await DBOS.runStep(() => chargeOnce(`loop-${id}`, i), { name: 'loop' }));
  // One step that charges twice: two calls.
  out.push(await DBOS.runStep(async () => [await chargeOnce(`twice-${id}`, 0), await chargeOnce(`twice-${id}`, 1)], { name: 'twice' }));
  return out;
}

const pay = DBOS.registerWorkflow(payFlow, { name: 'payFlow' });
const many = DBOS.registerWorkflow(manyFlow, { name: 'manyFlow' });

DBOS.setConfig({ name: 'idempotent-tools-e2e', systemDatabaseUrl: `postgres://postgres@127.0.0.1:5432/${DATABASE}`, logLevel: 'error' });
await DBOS.launch();
writeSync(1, 'launched\n');
if (START !== '') {
  const [flow, id] = START.split(':');
  const handle = await DBOS.startWorkflow(flow === 'many' ? many : pay, { workflowID: `${flow}-${id}` })(id);
  writeSync(1, `result ${JSON.stringify(await handle.getResult())}\n`);
}
if (WAIT !== '') writeSync(1, `result ${JSON.stringify(await DBOS.retrieveWorkflow(WAIT).getResult())}\n`);
await DBOS.shutdown();
process.exit(0);
