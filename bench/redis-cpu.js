'use strict';
/**
 * Where the CPU of a Redis call goes: CPU time per call of each of this process's
 * threads (the JavaScript thread, V8's helper threads, the Tokio worker that drives the
 * connection, named `idempotent-io`), read from /proc, and of the Redis server (INFO
 * cpu); and how often each thread went to sleep and was woken again per call (voluntary
 * context switches). Throughput on a 2-core machine is bounded by the CPU sum; one call
 * at a time, every wake-up of a sleeping thread is latency. Linux only.
 *
 *   REDIS_URL=redis://127.0.0.1:6379/14 node bench/redis-cpu.js [replay|unique] [calls] [in flight (64)] [implementation]
 *
 * The implementation is one of bench/scenarios/redis.js's (default idempotent-tools;
 * '@node-idempotency/core', 'Powertools (CachePersistenceLayer)', 'raw client floor').
 */
const fs = require('node:fs');
const { createClient } = require('@redis/client');
const { pool } = require('./lib/compare');
const { makeImpls, cleanup } = require('./scenarios/redis');

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379/14';
const mode = process.argv[2] || 'replay';
const total = Number(process.argv[3] || (mode === 'replay' ? 100_000 : 40_000));
const inFlight = Number(process.argv[4] || 64);
const implName = process.argv[5] || 'idempotent-tools';
const SEEDS = 1000;

/** CPU ms and sleeps so far per thread kind: 'javascript' (the main thread), else the thread's name. */
function threadCpuMs() {
  const out = {};
  const sleeps = {};
  for (const tid of fs.readdirSync('/proc/self/task')) {
    const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime, in 10 ms ticks
    const kind = tid === String(process.pid) ? 'javascript' : name === 'node' ? 'V8 helpers' : name;
    out[kind] = (out[kind] ?? 0) + ticks * 10;
    const status = fs.readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
    sleeps[kind] = (sleeps[kind] ?? 0) + Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)[1]);
  }
  return { cpu: out, sleeps };
}

async function serverCpuMs(admin) {
  const info = await admin.info('cpu');
  const sum = ['used_cpu_sys', 'used_cpu_user'].reduce((s, k) => s + Number(new RegExp(`${k}:([\\d.]+)`).exec(info)[1]), 0);
  return sum * 1000;
}

(async () => {
  const admin = await createClient({ url }).connect();
  const prefix = `redis-cpu:${process.pid}:`;
  const { impls, close } = await makeImpls(url, prefix, true);
  const impl = impls.find((i) => i.name === implName);
  if (!impl) throw new Error(`no implementation "${implName}"; pick one of: ${impls.map((i) => i.name).join(', ')}`);
  const charge = mode === 'replay' ? impl.replay : impl.unique;
  for (let n = 0; n < SEEDS; n++) await impl.seed({ n });
  const [threads0, server0, t0] = [threadCpuMs(), await serverCpuMs(admin), process.hrtime.bigint()];
  await pool(total, inFlight, (i) => charge({ n: mode === 'replay' ? i % SEEDS : SEEDS + i }));
  const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
  const [threads1, server1] = [threadCpuMs(), await serverCpuMs(admin)];
  const perCall = (ms) => ((ms * 1000) / total).toFixed(1);
  const row = { implementation: implName, mode, calls: total, 'in flight': inFlight, 'wall µs/call': (wallUs / total).toFixed(1) };
  for (const kind of Object.keys(threads1.cpu)) row[`${kind} CPU µs/call`] = perCall(threads1.cpu[kind] - (threads0.cpu[kind] ?? 0));
  for (const kind of ['javascript', 'idempotent-io']) {
    row[`${kind} sleeps/call`] = ((threads1.sleeps[kind] - (threads0.sleeps[kind] ?? 0)) / total).toFixed(2);
  }
  row['Redis server CPU µs/call'] = perCall(server1 - server0);
  console.log(JSON.stringify(row));
  await close();
  await cleanup(admin, prefix);
  await admin.quit();
})();
