'use strict';
/**
 * Two builds of this package side by side in one process: the way to tell whether a
 * change made a call faster on a VM whose speed drifts by 20-50% between runs (separate
 * runs of one build differ more than most changes do). Both builds are loaded at once
 * (each its own addon and runtime), and every scenario alternates them round by round;
 * it prints the median over rounds of B's time / A's time (below 1: B is faster).
 *
 *   node bench/compare-builds.js --snapshot /tmp/build-a     # copy the current build
 *   (change, rebuild: npx napi build --platform --release --output-dir native && npm run build:ts)
 *   node bench/compare-builds.js --snapshot /tmp/build-b
 *   node bench/compare-builds.js /tmp/build-a /tmp/build-b [sqlite|redis|postgres] [rounds]
 *
 * Redis is taken from REDIS_URL (default redis://127.0.0.1:6379/14); keys live under
 * `idt-compare:<pid>:` and are cleared at the end. PostgreSQL from IDEMPOTENT_TOOLS_BENCH_PG
 * or DATABASE_URL (default postgres://postgres@127.0.0.1:5432/pg_helper), in tables
 * `idt_compare_<pid>_a`/`_b`, cleared at the end (the empty tables stay).
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { pool } = require('./lib/compare');

const ROOT = path.resolve(__dirname, '..');

function snapshot(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const f of ['dist', 'native', 'binding.js', 'platform.js', 'package.json']) {
    fs.cpSync(path.join(ROOT, f), path.join(dir, f), { recursive: true });
  }
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  console.log(`copied the current build to ${dir}`);
}

const SCENARIOS = {
  'new, one at a time': { calls: 600, inFlight: 1, replay: false },
  'replay, one at a time': { calls: 1000, inFlight: 1, replay: true },
  'new, 64 in flight': { calls: 6000, inFlight: 64, replay: false },
  'replay, 64 in flight': { calls: 12000, inFlight: 64, replay: true },
};
const SEEDS = 500;

async function compareBuilds(dirA, dirB, kind, rounds) {
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379/14';
  const pgUrl = process.env.IDEMPOTENT_TOOLS_BENCH_PG || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/pg_helper';
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idt-compare-'));
  const open = (dir, tag) => {
    const lib = require(path.resolve(dir));
    const store =
      kind === 'redis'
        ? new lib.RedisStore({ url, prefix: `idt-compare:${process.pid}:${tag}:` })
        : kind === 'postgres'
          ? new lib.PostgresStore({ url: pgUrl, table: `idt_compare_${process.pid}_${tag}` })
          : new lib.SqliteStore({ path: path.join(tmp, `${tag}.db`), durability: 'normal' });
    // Like the bench's tool (lib/common.js), it awaits one turn of the loop, as real I/O does.
    const charge = lib.idempotent(async function charge(a) {
      await new Promise((resolve) => setImmediate(resolve));
      return { id: `ch_${a.n}`, amount: 1000 };
    }, { store, name: 'charge' });
    return { store, charge };
  };
  const builds = { A: open(dirA, 'a'), B: open(dirB, 'b') };
  try {
    for (const b of Object.values(builds)) for (let i = 0; i < SEEDS; i++) await b.charge({ n: -i });
    let seq = 0;
    const run = (charge, { calls, inFlight, replay }) =>
      pool(calls, inFlight, (i) => charge({ n: replay ? -(i % SEEDS) : ++seq }));
    const rows = {};
    for (const [name, s] of Object.entries(SCENARIOS)) {
      const ratios = [];
      for (let r = 0; r < rounds; r++) {
        const us = {};
        for (const which of r % 2 ? ['A', 'B'] : ['B', 'A']) {
          const t0 = process.hrtime.bigint();
          await run(builds[which].charge, s);
          us[which] = Number(process.hrtime.bigint() - t0) / 1e3 / s.calls;
        }
        ratios.push(us.B / us.A);
      }
      ratios.sort((x, y) => x - y);
      rows[name] = ratios[Math.floor(ratios.length / 2)].toFixed(3);
    }
    console.log(`${kind}: B's time / A's time, median of ${rounds} paired rounds (below 1: B is faster)`);
    console.table(rows);
  } finally {
    for (const b of Object.values(builds)) {
      if (kind !== 'sqlite') await b.store.clear();
      await b.store.close();
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
if (args[0] === '--snapshot') {
  snapshot(path.resolve(args[1]));
} else if (args.length >= 2) {
  compareBuilds(args[0], args[1], args[2] || 'sqlite', Number(args[3] || 9)).catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  console.error('usage: node bench/compare-builds.js --snapshot DIR | DIR_A DIR_B [sqlite|redis|postgres] [rounds]');
  process.exit(2);
}
