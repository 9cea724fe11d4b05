// A Temporal worker for temporal.test.mjs. Its activities charge through idempotentActivity
// (the package) and plainly (the control), each side effect written to the ledger. DIE=<point>
// freezes the worker there (the test kills it with SIGKILL); SLOW makes the first attempt of a
// charge wait for the test's release file (a slow attempt that Temporal gives up on while it still runs).
import { existsSync, writeSync } from 'node:fs';

import { Context } from '@temporalio/activity';
import { NativeConnection, Worker } from '@temporalio/worker';
import { SqliteStore } from 'idempotent-tools';
import { currentKey, idempotentActivity } from 'idempotent-tools/temporal';

import { ledgerEntries, recordSideEffect } from '../harness.mjs';

const { LEDGER, STORE, ADDRESS, QUEUE, BUNDLE, DIE = '', SLOW = '' } = process.env;
const store = new SqliteStore({ path: STORE });
const say = (line) => writeSync(1, `${line}\n`);

function freeze(line) {
  say(line);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

/** Resolves once the test creates the file `<SLOW>-<label>` (the worker's shutdown signals are Temporal's). */
function released(label) {
  return new Promise((resolve) => {
    const t = setInterval(() => existsSync(`${SLOW}-${label}`) && (clearInterval(t), resolve()), 20);
  });
}

async function sideEffect(label, extra = {}) {
  recordSideEffect(LEDGER, { label, key: currentKey() ?? null, attempt: Context.current().info.attempt, ...extra });
  const n = ledgerEntries(LEDGER).filter((e) => e.label === label).length;
  if (SLOW !== '' && n === 1) {
    say(`slow ${label}`);
    await released(label);
  }
  return `charged ${label} #${n}`;
}

const chargeCard = idempotentActivity(async function chargeCard(label) {
  const r = await sideEffect(label);
  if (DIE === 'in-side-effect') freeze('charged');
  return r;
}, {
  store,
  reconcile: ({ key }) => {
    const seen = ledgerEntries(LEDGER).find((e) => e.key === key);
    return seen ? { happened: true, result: `reconciled ${seen.label}` } : { happened: false };
  },
  // A retry that waits for a slow attempt still running (the claim's lease is alive).
  onEvent: (e) => e.type === 'in-flight' && say(`joined ${e.attempts}`),
});
const chargeOnceWrapped = idempotentActivity(async function chargeOnce(label, i) {
  return sideEffect(label, { i });
}, { store });

const activities = {
  async charge(label) {
    const r = await chargeCard(label);
    // After the side effect and its record, before Temporal records the activity's result.
    if (DIE === 'after-record') freeze('recorded');
    return r;
  },
  async controlCharge(label) {
    const r = await sideEffect(label);
    if (DIE === 'control') freeze('charged control');
    return r;
  },
  chargeOnce: chargeOnceWrapped,
  // One activity that charges twice: two calls.
  async chargeTwice(label) {
    return [await chargeOnceWrapped(label, 0), await chargeOnceWrapped(label, 1)];
  },
};

const connection = await NativeConnection.connect({ address: ADDRESS });
const worker = await Worker.create({ connection, taskQueue: QUEUE, workflowBundle: { codePath: BUNDLE }, activities });
say('worker running');
await worker.run();
