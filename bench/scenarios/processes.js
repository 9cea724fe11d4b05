'use strict';
/**
 * Unique calls from 1, 2, 4 and 8 processes on one SQLite file (full durability), ours
 * and the hand-rolled decorator, alternating. Each process makes its calls with 16 in
 * flight; throughput = all calls / the slowest process's time.
 */

const { fork } = require('node:child_process');
const path = require('node:path');

const { median } = require('../lib/stats');
const { tempDir, rmrf } = require('../lib/common');

const WORKER = path.join(__dirname, '..', 'workers', 'unique-worker.js');
const IN_FLIGHT = 16;

async function runOnce(file, procs, count, impl) {
  const children = Array.from({ length: procs }, () =>
    fork(WORKER, [file, 'full', String(count), String(IN_FLIGHT), impl], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  );
  const exited = children.map((c) => new Promise((resolve) => c.once('exit', resolve)));
  const message = (c) =>
    new Promise((resolve, reject) => {
      c.once('message', resolve);
      c.once('exit', (code) => reject(new Error(`worker exited with ${code}`)));
    });
  await Promise.all(children.map(message));
  const done = children.map(message);
  for (const c of children) c.send('go');
  const results = await Promise.all(done);
  await Promise.all(exited);
  const slowest = Math.max(...results.map((r) => r.ms));
  const total = results.reduce((a, r) => a + r.count, 0);
  return total / (slowest / 1000);
}

async function processes(ctx) {
  const counts = [1, 2, 4, 8];
  const rounds = ctx.quick ? 1 : 3;
  const perProc = ctx.quick ? 100 : 600;
  const impls = [
    ['ours', 'idempotent-tools'],
    ['hand', 'hand-rolled better-sqlite3'],
  ];
  const dir = tempDir('procs');
  const samples = {};
  try {
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 ? [...counts].reverse() : counts;
      for (const procs of order) {
        for (const [impl] of r % 2 ? [...impls].reverse() : impls) {
          const file = path.join(dir, `${impl}.db`);
          const rate = await runOnce(file, procs, perProc, impl);
          (samples[`${impl}/${procs}`] ??= []).push(rate);
        }
      }
    }
  } finally {
    rmrf(dir);
  }
  const rows = [];
  const data = [];
  for (const procs of counts) {
    const ours = median(samples[`ours/${procs}`]);
    const hand = median(samples[`hand/${procs}`]);
    const ours1 = median(samples['ours/1']);
    data.push({ processes: procs, oursCallsPerSec: ours, handCallsPerSec: hand, oursVsOneProcess: ours / ours1, speedupVsHand: ours / hand });
    rows.push([procs, ours, ours / ours1, hand, ours / hand]);
  }
  return {
    id: 'processes',
    title: 'Unique calls from many processes on one SQLite file (full durability)',
    note: `${perProc} unique calls per process, ${IN_FLIGHT} in flight per process; median of ${rounds} round(s); throughput = all calls / slowest process time.`,
    header: ['processes', 'ours calls/s', 'ours vs 1 process', 'hand-rolled calls/s', 'speedup vs hand-rolled'],
    rows,
    data,
  };
}

module.exports = { processes };
