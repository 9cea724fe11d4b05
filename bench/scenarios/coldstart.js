'use strict';
/** Cold start: a fresh child process per run, ours and hand-rolled alternating. */

const { execFileSync } = require('node:child_process');
const path = require('node:path');

const { median } = require('../lib/stats');
const { tempDir, rmrf } = require('../lib/common');

const WORKER = path.join(__dirname, '..', 'workers', 'cold-start.js');

async function coldStart(ctx) {
  const runs = ctx.quick ? 3 : 11;
  const dir = tempDir('cold');
  const impls = [
    ['ours', 'idempotent-tools'],
    ['hand', 'hand-rolled better-sqlite3'],
  ];
  const s = {};
  try {
    for (let r = 0; r < runs; r++) {
      for (const [impl] of r % 2 ? [...impls].reverse() : impls) {
        const file = path.join(dir, `${impl}-${r}.db`);
        const t0 = performance.now();
        const out = JSON.parse(execFileSync(process.execPath, [WORKER, impl, file], { encoding: 'utf8' }));
        const wall = performance.now() - t0;
        for (const [k, v] of Object.entries({ ...out, processMs: wall })) (s[`${impl}/${k}`] ??= []).push(v);
      }
    }
  } finally {
    rmrf(dir);
  }
  const rows = [];
  const data = {};
  for (const [impl, label] of impls) {
    const d = {
      importMs: median(s[`${impl}/importMs`]),
      firstCallMs: median(s[`${impl}/firstCallMs`]),
      processMs: median(s[`${impl}/processMs`]),
    };
    data[impl] = d;
    rows.push([label, d.importMs, d.firstCallMs, d.processMs]);
  }
  for (const row of rows) row.push(row[2] / data.hand.firstCallMs);
  return {
    id: 'cold-start',
    title: 'Cold start: import, open a new store file, first call (fresh process)',
    note: `Median of ${runs} fresh processes each, alternating. "import" and "first call" are measured inside the child from its first line; "process" is the parent's spawn-to-exit wall time (includes Node's own boot).`,
    header: ['implementation', 'import+wrap ms', 'to first result ms', 'whole process ms', 'first result vs hand-rolled'],
    rows,
    data,
  };
}

module.exports = { coldStart };
