'use strict';
// A campaign's worker process: calls a few keys in 'block' and 'raise' modes, with short
// leases, with and without `reconcile`, until the conductor says stop (an IPC message);
// writes everything to the ledger. Started by campaign.js:
//
//   node stress/faults/worker.js '<json config>'   (with an IPC channel)
//
// Keys move on every `rotateMs` (g<generation>-k<i>) so new keys are claimed, raced and
// faulted all run long. Odd keys are "reconcile keys": every caller of them passes
// `reconcile` and their side effect never declines; even keys decline now and then (the
// function's own error).

const { join } = require('node:path');

const { createRandom, deriveSeed } = require('./proxy');
const { Ledger, now } = require('./ledger');
const { makeCall, makeSideEffect, reconcileFromEffects, recordingStore } = require('./caller');
const { ROOT, openStore, usesTokio } = require('./stores');

const lib = require(ROOT);

/** The naive control's table (naive.js), where the store under test would keep records. */
function naiveTable(config) {
  const naive = require('./naive');
  switch (config.store) {
    case 'redis':
    case 'redis-tokio':
      return naive.redisTable(config.url, config.prefix);
    case 'postgres':
      return naive.postgresTable(config.url, `${config.table}_naive`);
    default:
      return naive.fileTable(join(config.dir, 'naive-records'));
  }
}

async function work(config) {
  const random = createRandom(deriveSeed(config.seed, Number(config.who.replace(/\D/g, '')) || 0));
  const ledger = new Ledger(config.dir, config.who);
  const sleep = (msLo, msHi) => new Promise((r) => setTimeout(r, random.int(msLo, msHi)));
  const sideEffect = makeSideEffect({
    dir: config.dir,
    who: config.who,
    work: () => sleep(config.runMs[0], config.runMs[1]),
    decline: (key) => !isReconcileKey(key) && random.chance(config.declineRate),
  });
  const isReconcileKey = (key) => Number(key.slice(key.lastIndexOf('k') + 1)) % 2 === 1;

  let store;
  let table;
  const wrappers = new Map(); // `${mode} ${leaseMs} ${reconcile}` -> wrapped
  if (config.control === 'naive') {
    table = naiveTable(config);
    const wrapped = require('./naive').naiveIdempotent(sideEffect, table);
    for (const mode of config.modes) for (const leaseMs of config.leases) for (const r of [false, true]) wrappers.set(`${mode} ${leaseMs} ${r}`, wrapped);
  } else {
    store = recordingStore(openStore(config), ledger);
    const reconcile = reconcileFromEffects(config.dir, ledger);
    for (const mode of config.modes) {
      for (const leaseMs of config.leases) {
        for (const r of [false, true]) {
          wrappers.set(`${mode} ${leaseMs} ${r}`, lib.idempotent(sideEffect, {
            store,
            name: 'faultEffect',
            onDuplicate: mode,
            leaseMs,
            pollIntervalMs: 20,
            pollTimeoutMs: config.pollTimeoutMs,
            payload: (key) => key,
            reconcile: r ? reconcile : undefined,
          }));
        }
      }
    }
  }

  if (store && (config.store === 'redis' || config.store === 'redis-tokio')) {
    ledger.write({ ev: 'transport', worker: config.who, tokio: await usesTokio(store) });
  }

  let stopping = false;
  process.on('message', (m) => {
    if (m === 'stop') stopping = true;
  });
  process.on('disconnect', () => {
    stopping = true; // the conductor is gone: finish up
  });

  let calls = 0;
  const lane = async () => {
    while (!stopping) {
      const generation = Math.floor((now() - config.t0) / config.rotateMs);
      const key = `g${generation}-k${random.int(0, config.keys - 1)}`;
      const mode = random.pick(config.modes);
      const leaseMs = random.pick(config.leases);
      const reconcile = isReconcileKey(key);
      const callId = `${config.who}:${++calls}`;
      await makeCall({ ledger, wrapped: wrappers.get(`${mode} ${leaseMs} ${reconcile}`), key, callId, mode, reconcile, leaseMs });
      // A short pause between calls: most calls of a key are replays, which prove
      // little; the pause leaves more of the run to new keys' claims, races and faults.
      await sleep(0, 20);
    }
  };
  ledger.write({ ev: 'worker-ready', worker: config.who, pid: process.pid });
  await Promise.all(Array.from({ length: config.lanes }, lane));
  await store?.close();
  await table?.close();
  ledger.write({ ev: 'worker-done', worker: config.who });
  ledger.close();
}

work(JSON.parse(process.argv[2])).then(
  () => process.exit(0),
  (err) => {
    console.error(`faults worker: ${err.stack}`);
    process.exit(3);
  },
);
