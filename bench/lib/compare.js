'use strict';
/**
 * Runs alternatives side by side: every round runs each alternative once, the order
 * flipping every round (A B C, C B A, ...), so that drift in the machine's load hits all
 * of them alike. Reports per-alternative medians over rounds and, for each alternative,
 * the median over rounds of its time divided by the baseline's time in the same round
 * (a paired ratio, robust to the noise of a shared machine). Each alternative's CPU per
 * operation (this process's threads by kind, and the server processes it names with
 * `serverPids`; see cpu.js) is the median over rounds too.
 */

const { median, quantile } = require('./stats');
const { cpuMeter } = require('./cpu');

/**
 * @param {object} o
 * @param {{name: string, run: (n: number) => Promise<void>, before?: () => (void | Promise<void>), after?: () => (void | Promise<void>), serverPids?: () => number[]}[]} o.alts
 * @param {number} o.rounds  measured rounds (one extra warm-up round is not counted)
 * @param {number} o.n       operations per alternative per round
 * @param {string} o.baseline  name of the alternative that ratios are taken against
 */
async function compare({ alts, rounds, n, baseline, warmup = 1 }) {
  const perOp = new Map(alts.map((a) => [a.name, []]));
  const cpuPerOp = new Map(alts.map((a) => [a.name, []]));
  for (let r = -warmup; r < rounds; r++) {
    const order = (r & 1) === 1 ? [...alts].reverse() : alts;
    for (const alt of order) {
      const measured = r >= 0;
      if (measured && alt.before) await alt.before();
      const meter = cpuMeter(alt.serverPids);
      const t0 = process.hrtime.bigint();
      await alt.run(n);
      const dt = Number(process.hrtime.bigint() - t0);
      const cpu = meter.stop();
      if (measured && alt.after) await alt.after();
      if (measured) perOp.get(alt.name).push(dt / n);
      if (measured && cpu) cpuPerOp.get(alt.name).push(cpu);
    }
  }
  const base = perOp.get(baseline);
  return alts.map((a) => {
    const xs = perOp.get(a.name);
    const ratios = xs.map((x, i) => x / base[i]);
    const medNs = median(xs);
    const cpus = cpuPerOp.get(a.name);
    const cpuUsPerOp = cpus.length === 0 ? null : Object.fromEntries(Object.keys(cpus[0]).map((k) => [k, median(cpus.map((c) => c[k])) / n / 1000]));
    return {
      name: a.name,
      rounds: xs.length,
      opsPerRound: n,
      medianUsPerOp: medNs / 1000,
      p25UsPerOp: quantile(xs, 0.25) / 1000,
      p75UsPerOp: quantile(xs, 0.75) / 1000,
      opsPerSec: 1e9 / medNs,
      // time ratio vs the baseline (lower is faster); its inverse is the speedup
      timeRatioVsBaseline: median(ratios),
      // CPU µs per operation by kind of thread (javascript, native, node helpers, server), or null
      cpuUsPerOp,
      samplesNsPerOp: xs,
    };
  });
}

/** Runs `n` calls of `call(i)` with `inFlight` of them outstanding at any moment. */
async function pool(n, inFlight, call) {
  if (inFlight <= 1) {
    for (let i = 0; i < n; i++) await call(i);
    return;
  }
  let next = 0;
  const worker = async () => {
    while (next < n) await call(next++);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, n) }, worker));
}

/** Median over rounds of a's time / b's time (two results of one compare() call). */
function pairedRatio(a, b) {
  return median(a.samplesNsPerOp.map((x, i) => x / b.samplesNsPerOp[i]));
}

module.exports = { compare, pool, pairedRatio };
