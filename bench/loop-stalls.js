'use strict';
/**
 * What the event loop's worst delays are made of while unique SQLite calls are in flight
 * (64 by default; issue 39 asks about 8 too). A 1 ms timer measures how late it fires (as
 * `monitorEventLoopDelay` does); at every firing the JavaScript thread's scheduler counters are read from
 * /proc/self/task/<pid>/schedstat (nanoseconds on a CPU, nanoseconds runnable but waiting
 * for one), and V8's GC pauses are recorded. For the slowest 1% of intervals it prints
 * how the time split between running on the JavaScript thread (our code, V8, GC), waiting
 * for a CPU (the thread was ready; the machine's cores were busy with other threads and
 * processes), and sleeping (nothing to run: the timer was simply due later), and how many
 * of them overlap a GC pause. Linux only.
 *
 *   node bench/loop-stalls.js [full|normal] [calls] [in flight]
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PerformanceObserver, performance } = require('node:perf_hooks');

const { idempotent, SqliteStore } = require('..');
const { pool } = require('./lib/compare');
const { charge, freshArgs } = require('./lib/common');

const durability = process.argv[2] || 'full';
const calls = Number(process.argv[3] || (durability === 'full' ? 4000 : 16000));
const inFlight = Number(process.argv[4] || 64);
const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;

function sched() {
  const [onCpuNs, waitingNs] = fs.readFileSync(SCHEDSTAT, 'latin1').split(' ').map(Number);
  return { onCpu: onCpuNs / 1e6, waiting: waitingNs / 1e6 };
}

(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idt-bench-stalls-'));
  const store = new SqliteStore({ path: path.join(dir, 'store.db'), durability });
  await store.ready();
  const wrapped = idempotent(charge, { store, name: 'charge' });
  await pool(64, 64, () => wrapped(freshArgs('warm')));

  const gcs = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push({ at: e.startTime, ms: e.duration });
  });
  observer.observe({ entryTypes: ['gc'] });

  const intervals = [];
  let running = true;
  let last = { at: performance.now(), ...sched() };
  const tick = () => {
    const now = { at: performance.now(), ...sched() };
    intervals.push({
      start: last.at,
      ms: now.at - last.at,
      onCpu: now.onCpu - last.onCpu,
      waiting: now.waiting - last.waiting,
    });
    last = now;
    if (running) setTimeout(tick, 1);
  };
  setTimeout(tick, 1);

  const t0 = performance.now();
  await pool(calls, inFlight, () => wrapped(freshArgs('u')));
  const wallMs = performance.now() - t0;
  running = false;
  await new Promise((r) => setTimeout(r, 5));
  observer.disconnect();
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });

  intervals.sort((a, b) => b.ms - a.ms);
  const delay = (i) => Math.max(0, i.ms - 1);
  const at = (q) => delay(intervals[Math.min(intervals.length - 1, Math.floor(intervals.length * (1 - q)))]);
  const worst = intervals.slice(0, Math.max(1, Math.ceil(intervals.length * 0.01)));
  const sum = (f) => worst.reduce((s, i) => s + f(i), 0);
  const total = sum((i) => i.ms);
  const onCpu = sum((i) => Math.min(i.onCpu, i.ms));
  const waiting = sum((i) => Math.min(i.waiting, i.ms - Math.min(i.onCpu, i.ms)));
  const withGc = worst.filter((i) => gcs.some((g) => g.at < i.start + i.ms && g.at + g.ms > i.start));
  const pct = (x) => `${((100 * x) / total).toFixed(0)}%`;
  const row = {
    durability,
    calls,
    'µs/call': ((wallMs * 1000) / calls).toFixed(1),
    'p50 delay ms': at(0.5).toFixed(2),
    'p99 delay ms': at(0.99).toFixed(2),
    'max delay ms': delay(intervals[0]).toFixed(2),
    'slowest 1%: intervals': worst.length,
    'on the JS thread': pct(onCpu),
    'waiting for a CPU': pct(waiting),
    'sleeping': pct(Math.max(0, total - onCpu - waiting)),
    'overlapping a GC pause': `${withGc.length}/${worst.length}`,
    'GC pauses': gcs.length,
    'longest GC ms': Math.max(0, ...gcs.map((g) => g.ms)).toFixed(2),
    'loadavg': os.loadavg()[0].toFixed(2),
  };
  console.log(JSON.stringify(row));
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
