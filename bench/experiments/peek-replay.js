'use strict';
/**
 * Before/after of the peekReplay prototype, in one process: the same build, one store,
 * wrapped twice: once as shipped (the lean peekReplay fast path) and once through a view
 * of the store without peekReplay, which takes the old path (peekCompleted: the whole
 * record, then the fingerprint check in JavaScript). The hand-rolled decorator runs
 * alongside as the yardstick. Usage: node bench/experiments/peek-replay.js [--quick]
 */

const path = require('node:path');
const { compare, pool, pairedRatio } = require('../lib/compare');
const { pkg, charge, freshArgs, tempDir, rmrf } = require('../lib/common');
const { openHandRolledDb, handRolledIdempotent } = require('../lib/handrolled');
const { textTable, fmtNum, fmtRatio } = require('../lib/stats');

(async () => {
  const quick = process.argv.includes('--quick');
  const { idempotent, SqliteStore } = pkg();
  const dir = tempDir('peek');
  try {
    for (const durability of ['full', 'normal']) {
      const store = new SqliteStore({ path: path.join(dir, `ours-${durability}.db`), durability });
      await store.ready();
      if (typeof store.peekReplay !== 'function') throw new Error('this build has no peekReplay');
      const oldPath = new Proxy(store, {
        get(target, prop) {
          if (prop === 'peekReplay') return undefined;
          const v = Reflect.get(target, prop, target);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      const after = idempotent(charge, { store, name: 'charge' });
      const before = idempotent(charge, { store: oldPath, name: 'charge' });
      const db = openHandRolledDb(path.join(dir, `hand-${durability}.db`), durability);
      const hand = handRolledIdempotent(db, 'charge', charge);
      const K = 1000;
      const keys = Array.from({ length: K }, () => freshArgs('peek'));
      await pool(K, 64, (i) => after(keys[i]));
      await pool(K, 64, (i) => hand(keys[i]));
      let at = 0;
      const loop = (f) => async (m) => {
        for (let i = 0; i < m; i++) await f(keys[(at + i) % K]);
        at += 7;
      };
      const res = await compare({
        rounds: quick ? 5 : 21,
        n: quick ? 300 : 3000,
        baseline: 'hand-rolled better-sqlite3',
        alts: [
          { name: 'after: peekReplay', run: loop(after) },
          { name: 'before: peekCompleted', run: loop(before) },
          { name: 'hand-rolled better-sqlite3', run: loop(hand) },
        ],
      });
      console.log(`\nSQLite replay, ${durability} durability`);
      console.log(textTable(['path', 'median µs/call', 'time vs hand-rolled'], res.map((r) => [r.name, fmtNum(r.medianUsPerOp), fmtRatio(r.timeRatioVsBaseline)])));
      console.log(`after / before (paired): ${fmtRatio(pairedRatio(res[0], res[1]))}`);
      await store.close();
      db.close();
    }
  } finally {
    rmrf(dir);
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
