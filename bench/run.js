#!/usr/bin/env node
'use strict';
/**
 * Benchmarks of idempotent-tools against the alternatives (see bench/RESULTS.md).
 *
 *   npm run bench                  every scenario; writes bench/results.json, and (full
 *                                  runs of every scenario only) bench/ratios.svg and the
 *                                  generated part of bench/RESULTS.md
 *   npm run bench -- --quick       a smoke run for CI (well under a minute)
 *   node bench/run.js --only=sqlite-replay,redis
 *
 * Every scenario runs the alternatives side by side in this one process (or in child
 * processes it starts), alternating their order round by round; tables show medians and
 * paired ratios. No timing is asserted anywhere: goals are reported, never enforced.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { fmtNum, fmtRatio, textTable, mdTable } = require('./lib/stats');
const { ratioChart } = require('./lib/svg');

const SCENARIOS = {
  'sqlite-replay': () => require('./scenarios/sqlite').replay,
  'sqlite-unique': () => require('./scenarios/sqlite').unique, // also event-loop
  redis: () => require('./scenarios/redis').redis, // also redis-commands
  postgres: () => require('./scenarios/postgres').postgres,
  'scale-replay': () => require('./scenarios/scale').scale,
  operations: () => require('./scenarios/operations').operations,
  processes: () => require('./scenarios/processes').processes,
  'cold-start': () => require('./scenarios/coldstart').coldStart,
};

function parseArgs(argv) {
  const o = { quick: false, only: null, out: path.join(__dirname, 'results.json') };
  for (const a of argv) {
    if (a === '--quick') o.quick = true;
    else if (a.startsWith('--out=')) o.out = path.resolve(a.slice(6));
    else if (a.startsWith('--only=')) o.only = a.slice(7).split(',').filter(Boolean);
    else if (a === '--help' || a === '-h') {
      console.log('usage: node bench/run.js [--quick] [--only=' + Object.keys(SCENARIOS).join(',') + '] [--out=results.json]');
      process.exit(0);
    } else {
      console.error(`unknown argument ${a}`);
      process.exit(2);
    }
  }
  for (const id of o.only ?? []) {
    if (!SCENARIOS[id]) {
      console.error(`unknown scenario ${id}; the scenarios are ${Object.keys(SCENARIOS).join(', ')}`);
      process.exit(2);
    }
  }
  return o;
}

function machine() {
  let cpu = 'unknown';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) cpu = m[1].trim();
  } catch {}
  return {
    nproc: os.availableParallelism ? os.availableParallelism() : os.cpus().length,
    cpu,
    memGB: +(os.totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    loadavgAtStart: os.loadavg().map((x) => +x.toFixed(2)),
  };
}

const cell = (c) => (typeof c === 'number' ? fmtNum(c) : c);

/** Turns numeric ratio columns into "1.23x" for display. */
function displayRows(r) {
  const ratioCols = r.header.map((h, i) => (/ratio|speedup|of floor|faster by|vs 1 process|vs hand-rolled/.test(h) ? i : -1)).filter((i) => i >= 0);
  return r.rows.map((row) => row.map((c, i) => (ratioCols.includes(i) && typeof c === 'number' ? fmtRatio(c) : cell(c))));
}

function goals(byId, quick) {
  const out = [];
  const add = (g) => out.push(g);
  const leq = (value, target) => ({ met: value <= target, by: value <= target ? `${((1 - value / target) * 100).toFixed(0)}% to spare` : `missed by ${((value / target - 1) * 100).toFixed(0)}%` });
  const geq = (value, target) => ({ met: value >= target, by: value >= target ? `${((value / target - 1) * 100).toFixed(0)}% to spare` : `missed by ${((1 - value / target) * 100).toFixed(0)}% (reached ${(value / target * 100).toFixed(0)}% of the goal)` });
  const ours = (arr) => arr?.find((r) => r.name === 'idempotent-tools');

  const rep = byId['sqlite-replay'];
  for (const d of ['full', 'normal']) {
    const o = ours(rep?.data?.[d]);
    if (!o) continue;
    const v = o.timeRatioVsBaseline;
    add({ goal: `SQLite replay latency <= 1.1x the hand-rolled decorator's (${d})`, value: fmtRatio(v), target: '<= 1.10x', ...leq(v, 1.1), bar: { label: `SQLite replay, ${d} (speed vs hand-rolled)`, value: 1 / v, goal: 1 / 1.1 } });
  }
  const uni = byId['sqlite-unique'];
  for (const [d, t] of [['full', 3], ['normal', 1]]) {
    const o1 = ours(uni?.data?.[`${d}/1`]);
    if (o1) out.push({ bar: { label: `SQLite unique, ${d}, 1 in flight` , value: 1 / o1.timeRatioVsBaseline } });
    const o = ours(uni?.data?.[`${d}/64`]);
    if (!o) continue;
    const v = 1 / o.timeRatioVsBaseline;
    add({ goal: `SQLite unique calls, 64 in flight, ${d} durability: >= ${t}x the hand-rolled decorator`, value: fmtRatio(v), target: `>= ${t}.00x`, ...geq(v, t), bar: { label: `SQLite unique, ${d}, 64 in flight`, value: v, goal: t } });
  }
  const eld = byId['event-loop'];
  for (const d of ['full', 'normal']) {
    for (const inFlight of [8, 64]) {
      const e = eld?.data?.[`eld/${d}/${inFlight}`];
      if (!e) continue;
      add({ goal: `Event-loop p99 delay < 1 ms with ${inFlight} unique calls in flight (${d}); hand-rolled: ${e.hand.p99Ms.toFixed(2)} ms`, value: `${e.ours.p99Ms.toFixed(2)} ms`, target: '< 1 ms', ...leq(e.ours.p99Ms, 1), met: e.ours.p99Ms < 1 });
    }
  }
  const redis = byId.redis;
  const cmds = byId['redis-commands'];
  if (redis?.skipped) {
    add({ goal: 'Redis goals', value: 'not run', target: '-', met: false, by: redis.skipped });
  } else if (redis && !redis.data.oursAvailable) {
    add({ goal: 'Redis goals', value: 'not run', target: '-', met: false, by: 'RedisStore was not available (see the Redis table note)' });
  } else if (redis) {
    const c = cmds.data['idempotent-tools'];
    add({ goal: 'Redis: a replay is one round trip (commands sent per replay)', value: c.replay.clientCommandsPerOp.toFixed(2), target: '1', met: Math.abs(c.replay.clientCommandsPerOp - 1) < 0.01, by: Object.entries(c.replay.clientCommandsByName).map(([k, v]) => `${k} ${v}`).join(', ') });
    add({ goal: 'Redis: a unique call is two round trips (commands sent per call)', value: c.unique.clientCommandsPerOp.toFixed(2), target: '2', met: Math.abs(c.unique.clientCommandsPerOp - 2) < 0.01, by: Object.entries(c.unique.clientCommandsByName).map(([k, v]) => `${k} ${v}`).join(', ') });
    // Issue 13's goals, against @node-idempotency/core (the faster alternative here).
    for (const [op, target] of [['replay', 1.5], ['unique', 1.2]]) {
      const run = redis.data.runs[`${op}/64`];
      const v = run.speedupVsNodeIdempotency;
      add({ goal: `Redis ${op}s, 64 in flight: >= ${target}x @node-idempotency/core`, value: fmtRatio(v), target: `>= ${target.toFixed(2)}x`, ...geq(v, target), bar: { label: `Redis ${op}, 64 in flight, vs node-idempotency`, value: v, goal: target } });
      add({ goal: `Redis ${op}s, 64 in flight: >= 50% of the raw-client floor`, value: `${(run.fractionOfFloor * 100).toFixed(0)}%`, target: '>= 50%', ...geq(run.fractionOfFloor, 0.5), bar: { label: `Redis ${op}, 64 in flight, share of floor`, value: run.fractionOfFloor, goal: 0.5 } });
    }
    for (const [op, target] of [['replay', 1], ['unique', 1.2]]) {
      const v = 1 / redis.data.runs[`${op}/1`].speedupVsNodeIdempotency; // our time / theirs
      add({ goal: `Redis ${op}, one at a time: our time <= ${target}x @node-idempotency/core's`, value: fmtRatio(v), target: `<= ${target.toFixed(2)}x`, ...leq(v, target) });
    }
  }
  // Issue 24's Postgres goals: new calls at 64 in flight well ahead, replays ahead, one at a time even.
  const pg = byId.postgres;
  if (pg && !pg.skipped) {
    const peers = [['speedupVsNodeIdempotency', "@node-idempotency's adapter"], ['speedupVsHandRolled', 'the hand-rolled decorator']];
    for (const [field, who] of peers) {
      for (const [op, target] of [['unique', field === 'speedupVsNodeIdempotency' ? 2 : 1.5], ['replay', 1]]) {
        const v = pg.data.runs[`${op}/64`][field];
        add({ goal: `Postgres ${op === 'unique' ? 'new calls' : 'replays'}, 64 in flight: >= ${target}x ${who}`, value: fmtRatio(v), target: `>= ${target.toFixed(2)}x`, ...geq(v, target), bar: { label: `Postgres ${op}, 64 in flight, vs ${who}`, value: v, goal: target } });
      }
      for (const op of ['replay', 'unique']) {
        const v = 1 / pg.data.runs[`${op}/1`][field]; // our time / theirs
        add({ goal: `Postgres ${op === 'unique' ? 'new call' : 'replay'}, one at a time: our time <= 1.1x ${who}'s`, value: fmtRatio(v), target: '<= 1.10x', ...leq(v, 1.1) });
      }
    }
  }
  const sc = byId['scale-replay'];
  if (sc) {
    const last = sc.data[sc.data.length - 1];
    const v = last.timeRatioVsBaseline;
    const label = last.records.toLocaleString('en-US');
    add({ goal: `Replay latency with ${label} records <= 1.3x that with 1,000${quick || last.records < 1e6 ? ' (1M is measured only in the full run)' : ''}`, value: fmtRatio(v), target: '<= 1.30x', ...leq(v, 1.3), bar: { label: `Replay at ${label} records vs 1k (speed)`, value: 1 / v, goal: 1 / 1.3 } });
  }
  // Issue 40's goals, at the largest size measured.
  const ops = byId.operations;
  if (ops && !ops.skipped) {
    for (const [kind, d] of Object.entries(ops.data)) {
      const size = Math.max(...Object.keys(d).map(Number).filter(Number.isFinite));
      const m = d[size];
      const at = `${kind}, ${size.toLocaleString('en-US')} records${size < 1e6 ? ' (1M in the full run)' : ''}`;
      if (!m || m.error) {
        add({ goal: `${at}: the operator's paths`, value: 'failed', target: '-', met: false, by: m?.error ?? 'not run' });
        continue;
      }
      add({ goal: `${at}: listRecent(20) within 2 s`, value: `${(m.list.ms / 1000).toFixed(2)} s`, target: '<= 2 s', ...leq(m.list.ms, 2000) });
      add({ goal: `${at}: listRecent(20) adds at most 300 MB`, value: `${m.list.addedMB.toFixed(0)} MB`, target: '<= 300 MB', ...leq(Math.max(m.list.addedMB, 0), 300) });
      add({ goal: `${at}: no listing holds the event loop 200 ms`, value: `${Math.max(m.list.maxGapMs, m.stats.maxGapMs).toFixed(0)} ms`, target: '<= 200 ms', ...leq(Math.max(m.list.maxGapMs, m.stats.maxGapMs), 200) });
      add({ goal: `${at}: stats() within 2 s`, value: `${(m.stats.ms / 1000).toFixed(2)} s`, target: '<= 2 s', ...leq(m.stats.ms, 2000) });
      if (m.caller) {
        add({ goal: `${at}: a caller waits at most 200 ms during prune(), and none fails`, value: `${m.caller.worstMs.toFixed(0)} ms, ${m.caller.failures} failed`, target: '<= 200 ms, 0', ...leq(m.caller.worstMs, 200), ...(m.caller.failures > 0 ? { met: false, by: `${m.caller.failures} calls failed` } : {}) });
      }
      if (d.pruneRatio) add({ goal: `${kind}: prune() of the larger size within 10x the smaller's time`, value: fmtRatio(d.pruneRatio), target: '<= 10.00x', ...leq(d.pruneRatio, 10) });
    }
  }
  return out;
}

function goalsTable(gs) {
  return mdTable(
    ['goal', 'measured', 'target', 'result'],
    gs.filter((g) => g.goal).map((g) => [g.goal, g.value, g.target, `${g.met ? 'met' : '**missed**'}: ${g.by}`]),
  );
}

function writeGenerated(file, generated) {
  const start = '<!-- generated:start (bench/run.js writes this part; edit outside it) -->';
  const end = '<!-- generated:end -->';
  let text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : `# Benchmarks\n\n${start}\n${end}\n`;
  const a = text.indexOf(start);
  const b = text.indexOf(end);
  if (a < 0 || b < 0) text = `${text}\n${start}\n${end}\n`;
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  fs.writeFileSync(file, `${text.slice(0, i + start.length)}\n${generated}\n${text.slice(j)}`);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ctx = { quick: opts.quick };
  const ids = opts.only ?? Object.keys(SCENARIOS);
  const info = machine();
  const started = new Date();
  const command = `npm run bench${opts.quick ? ' -- --quick' : ''}${opts.only ? ` (node bench/run.js --only=${opts.only.join(',')})` : ''}`;
  console.log(`idempotent-tools benchmarks${opts.quick ? ' (quick)' : ''}: ${info.nproc} CPUs (${info.cpu}), Node ${info.node}, load ${info.loadavgAtStart.join(' ')}`);
  const results = [];
  for (const id of ids) {
    const t0 = performance.now();
    process.stdout.write(`\n== ${id} ...\n`);
    let out;
    try {
      out = await SCENARIOS[id]()(ctx);
    } catch (err) {
      console.error(`scenario ${id} failed:`, err);
      out = { id, title: id, skipped: `failed: ${err.message}`, header: [], rows: [], data: {} };
      process.exitCode = 1;
    }
    for (const r of [].concat(out)) {
      r.seconds = +((performance.now() - t0) / 1000).toFixed(1);
      results.push(r);
      console.log(`\n${r.title}${r.skipped ? `: SKIPPED (${r.skipped})` : ''}`);
      if (r.note) console.log(r.note);
      if (r.rows.length) console.log(textTable(r.header, displayRows(r)));
    }
  }
  const byId = Object.fromEntries(results.map((r) => [r.id, r]));
  const gs = goals(byId, opts.quick);
  console.log('\nGoals');
  console.log(textTable(['goal', 'measured', 'target', 'result'], gs.filter((g) => g.goal).map((g) => [g.goal, g.value, g.target, `${g.met ? 'met' : 'MISSED'}: ${g.by}`])));

  const totalSeconds = +((Date.now() - started.getTime()) / 1000).toFixed(1);
  const json = { quick: opts.quick, command, startedAt: started.toISOString(), totalSeconds, machine: info, goals: gs, scenarios: results };
  fs.writeFileSync(opts.out, JSON.stringify(json, null, 2) + '\n');
  console.log(`\nwrote ${path.relative(process.cwd(), opts.out)} (${totalSeconds} s in all)`);

  if (!opts.quick && !opts.only) {
    const bars = gs.filter((g) => g.bar).map((g) => ({ ...g.bar, met: g.met }));
    fs.writeFileSync(
      path.join(__dirname, 'ratios.svg'),
      ratioChart(bars, { title: 'idempotent-tools vs the alternatives (ratios, same run)', subtitle: `${info.nproc} × ${info.cpu}, Node ${info.node}; ${started.toISOString().slice(0, 10)}; higher is better for idempotent-tools` }),
    );
    const md = [
      `Run: \`${command}\` on ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${totalSeconds} s.`,
      '',
      `Machine: ${info.nproc} CPUs (\`nproc\`), ${info.cpu} (/proc/cpuinfo), ${info.memGB} GB RAM, ${info.platform}, Node ${info.node}; load average at start ${info.loadavgAtStart.join(' ')}. The machine is shared and noisy: compare ratios within a table, not absolute times across runs.`,
      '',
      '![ratios](ratios.svg)',
      '',
      '### Goals',
      '',
      goalsTable(gs),
      '',
      ...results.flatMap((r) => [
        `### ${r.title}`,
        '',
        ...(r.skipped ? [`Skipped: ${r.skipped}`, ''] : []),
        ...(r.note ? [r.note, ''] : []),
        ...(r.rows.length ? [mdTable(r.header, displayRows(r)), ''] : []),
      ]),
    ].join('\n');
    writeGenerated(path.join(__dirname, 'RESULTS.md'), md);
    console.log('wrote bench/ratios.svg and bench/RESULTS.md');
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
