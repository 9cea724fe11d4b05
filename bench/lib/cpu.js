'use strict';
/**
 * CPU time by thread, for the bench's "CPU per call" columns: this process's threads
 * grouped by what they run, and any server processes a scenario names (a PostgreSQL
 * backend, say), read from /proc/<pid>/task/<tid>/schedstat (nanoseconds on the CPU, as
 * the scheduler counts them; no 10 ms ticks). Linux only: elsewhere every reading is
 * null and the columns say "-".
 *
 * Kinds of this process's threads (by the name Linux shows, cut at 15 characters):
 * - javascript: the main thread (the wrapper, node-postgres, better-sqlite3, @redis/client);
 * - native: the addon's threads: its Tokio worker and blocking pool (`idempotent-io`) and
 *   the SQLite writer (`idempotent-tools-sqlite-writer`);
 * - node helpers: every other thread (V8's GC and compiler threads, libuv's pool).
 */

const fs = require('node:fs');

const KINDS = ['javascript', 'native', 'node helpers'];

function kindOf(tid, comm) {
  if (tid === String(process.pid)) return 'javascript';
  if (comm.startsWith('idempotent-')) return 'native';
  return 'node helpers';
}

function readNs(file) {
  try {
    return Number(fs.readFileSync(file, 'utf8').split(' ')[0]);
  } catch {
    return 0; // the thread or process ended meanwhile
  }
}

/** Nanoseconds on the CPU so far, by kind of thread of this process; null off Linux. */
function threadCpuNs() {
  let tids;
  try {
    tids = fs.readdirSync('/proc/self/task');
  } catch {
    return null;
  }
  const out = Object.fromEntries(KINDS.map((k) => [k, 0]));
  for (const tid of tids) {
    let comm;
    try {
      comm = fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    out[kindOf(tid, comm)] += readNs(`/proc/self/task/${tid}/schedstat`);
  }
  return out;
}

/** Nanoseconds on the CPU so far of the given processes (all their threads); null off Linux. */
function processCpuNs(pids) {
  if (!fs.existsSync('/proc/self/schedstat')) return null;
  let total = 0;
  for (const pid of pids) total += readNs(`/proc/${pid}/schedstat`);
  return total;
}

/**
 * Measures one stretch of work: `const m = cpuMeter(serverPids); ...; m.stop()` gives
 * nanoseconds by kind (and `server` when `serverPids` returns pids), or null off Linux.
 */
function cpuMeter(serverPids) {
  const pids = serverPids?.() ?? [];
  const t0 = threadCpuNs();
  const s0 = pids.length ? processCpuNs(pids) : null;
  return {
    stop() {
      const t1 = threadCpuNs();
      if (t0 === null || t1 === null) return null;
      const out = Object.fromEntries(KINDS.map((k) => [k, t1[k] - t0[k]]));
      if (s0 !== null) out.server = processCpuNs(pids) - s0;
      return out;
    },
  };
}

/** Table columns for compare()'s `cpuUsPerOp`: this process's threads by kind. */
const CPU_HEADER = ['JS CPU µs/op', 'native CPU µs/op', 'node helpers CPU µs/op'];

/** The cells of CPU_HEADER (and the server's, when measured) for one result; '-' when not measured. */
function cpuCells(cpu) {
  const cell = (v) => (v === undefined || v === null ? '-' : +v.toFixed(1));
  return [cell(cpu?.javascript), cell(cpu?.native), cell(cpu?.['node helpers']), cell(cpu?.server)];
}

module.exports = { KINDS, CPU_HEADER, threadCpuNs, processCpuNs, cpuMeter, cpuCells };
