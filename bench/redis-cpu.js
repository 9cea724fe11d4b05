'use strict';
/**
 * Where the CPU of a Redis call goes, 64 calls in flight: CPU time per call of each of
 * this process's threads (the JavaScript thread, V8's helper threads, the Tokio worker
 * that drives the connection, named `idempotent-io`), read from /proc, and of the Redis
 * server (INFO cpu).
 * Throughput on a 2-core machine is bounded by their sum, so this says which part to
 * shrink. Linux only.
 *
 *   REDIS_URL=redis://127.0.0.1:6379/14 node bench/redis-cpu.js [replay|unique] [calls]
 */
const fs = require('node:fs');
const { createClient } = require('@redis/client');
const { idempotent, RedisStore } = require('..');

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379/14';
const mode = process.argv[2] || 'replay';
const total = Number(process.argv[3] || (mode === 'replay' ? 100_000 : 40_000));
const SEEDS = 1000;

/** CPU ms so far per thread kind: 'javascript' (the main thread), else the thread's name. */
function threadCpuMs() {
  const out = {};
  for (const tid of fs.readdirSync('/proc/self/task')) {
    const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime, in 10 ms ticks
    const kind = tid === String(process.pid) ? 'javascript' : name === 'node' ? 'V8 helpers' : name;
    out[kind] = (out[kind] ?? 0) + ticks * 10;
  }
  return out;
}

async function serverCpuMs(admin) {
  const info = await admin.info('cpu');
  const sum = ['used_cpu_sys', 'used_cpu_user'].reduce((s, k) => s + Number(new RegExp(`${k}:([\\d.]+)`).exec(info)[1]), 0);
  return sum * 1000;
}

(async () => {
  const admin = await createClient({ url }).connect();
  const store = new RedisStore({ url, prefix: `redis-cpu:${process.pid}:` });
  const charge = idempotent(async function charge(a) { return { id: `ch_${a.n}`, amount: 1000 }; }, { store });
  for (let n = 0; n < SEEDS; n++) await charge({ n });
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      await charge({ n: mode === 'replay' ? i % SEEDS : SEEDS + i });
    }
  };
  const [threads0, server0, t0] = [threadCpuMs(), await serverCpuMs(admin), process.hrtime.bigint()];
  await Promise.all(Array.from({ length: 64 }, worker));
  const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
  const [threads1, server1] = [threadCpuMs(), await serverCpuMs(admin)];
  const perCall = (ms) => ((ms * 1000) / total).toFixed(1);
  const row = { mode, calls: total, 'wall µs/call': (wallUs / total).toFixed(1) };
  for (const kind of Object.keys(threads1)) row[`${kind} CPU µs/call`] = perCall(threads1[kind] - (threads0[kind] ?? 0));
  row['Redis server CPU µs/call'] = perCall(server1 - server0);
  console.log(JSON.stringify(row));
  await store.clear();
  await store.close();
  await admin.quit();
})();
