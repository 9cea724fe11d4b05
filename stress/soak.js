#!/usr/bin/env node
// Soak: a million wrapped calls in one process (new keys, replays, failures, 64 in
// flight), sampling memory as it goes. RSS must level off: no per-call leak in the
// wrapper, the napi boundary or the store.
//
//   node stress/soak.js [--calls 1000000] [--store sqlite|redis] [--redis URL]

const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { parseArgs } = require('node:util');
const lib = require('..');

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '1000000' },
    store: { type: 'string', default: 'sqlite' },
    redis: { type: 'string', default: process.env.REDIS_URL || 'redis://127.0.0.1:6379/15' },
  },
});

async function main() {
  const calls = Number(values.calls);
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-soak-'));
  const store = values.store === 'redis'
    ? new lib.RedisStore({ url: values.redis, prefix: `soak:${process.pid}:` })
    : new lib.SqliteStore({ path: join(dir, 'store.db'), durability: 'normal' });
  const tool = lib.idempotent(async function soak(i) {
    if (i % 97 === 0) throw new Error(`planned failure ${i}`);
    return { i, payload: 'x'.repeat(64) };
  }, { store, onDuplicate: 'block', pollIntervalMs: 5 });

  const samples = [];
  const sample = (done) => {
    if (global.gc) global.gc();
    samples.push({ done, rssMb: process.memoryUsage().rss / 2 ** 20, heapMb: process.memoryUsage().heapUsed / 2 ** 20 });
  };
  sample(0);
  let next = 0;
  const every = Math.max(1, Math.floor(calls / 20));
  const lane = async () => {
    for (;;) {
      const n = next++;
      if (n >= calls) return;
      // 10% new keys, 90% replays of recent ones.
      const i = n % 10 === 0 ? n : n - (n % 10);
      await tool(i).catch((e) => {
        if (!/planned failure/.test(e.message)) throw e;
      });
      if ((n + 1) % every === 0) sample(n + 1);
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: 64 }, lane));
  const seconds = (Date.now() - started) / 1000;
  if (values.store === 'redis') await store.clear();
  await store.close();
  rmSync(dir, { recursive: true, force: true });

  for (const s of samples) console.log(`${String(s.done).padStart(9)} calls  rss ${s.rssMb.toFixed(1).padStart(7)} MiB  heap ${s.heapMb.toFixed(1).padStart(6)} MiB`);
  const half = samples[Math.floor(samples.length / 2)].rssMb;
  const last = samples[samples.length - 1].rssMb;
  const growth = (last - half) / half;
  const ok = growth < 0.15;
  console.log(
    `soak ${values.store}: ${ok ? 'LEVEL' : 'GROWING'}: ${calls} calls in ${seconds.toFixed(0)} s ` +
      `(${Math.round(calls / seconds)} calls/s); RSS ${half.toFixed(1)} MiB at half-way, ${last.toFixed(1)} MiB at the end (${(growth * 100).toFixed(1)}%)`,
  );
  process.exitCode = ok ? 0 : 1;
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
