'use strict';
/**
 * How long the one synchronous call, the replay read (`peekReplay`), holds the JavaScript
 * thread while another process writes to the same file as fast as it can (commits, WAL
 * growth, checkpoints). It runs with a busy timeout of zero, so it should never wait on a
 * lock: when it cannot read at once it answers null and the call takes the async path.
 *
 *   node bench/peek-blocking.js [--samples 200000] [--no-writer]
 */

const { spawn } = require('node:child_process');
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const path = require('node:path');
const { idempotent, SqliteStore } = require('..');

const samples = Number(process.argv[process.argv.indexOf('--samples') + 1]) || 200_000;

async function writer(db) {
  const store = new SqliteStore({ path: db });
  const op = idempotent(async function write(i) { return { i }; }, { store });
  let i = 0;
  for (;;) await Promise.all(Array.from({ length: 32 }, () => op(`w${process.pid}-${i++}`)));
}

async function main() {
  const dir = mkdtempSync(path.join(tmpdir(), 'peek-blocking-'));
  const db = path.join(dir, 'store.db');
  const store = new SqliteStore({ path: db });
  const read = idempotent(async function read(i) { return { i, text: 'x'.repeat(200) }; }, { store });
  const keys = [];
  for (let i = 0; i < 1000; i++) {
    await read(i);
    keys.push(read.keyFor(i));
  }
  const fps = await Promise.all(keys.map(async (k) => (await store.get(k)).fingerprint));

  const quiet = process.argv.includes('--no-writer');
  const child = quiet ? undefined : spawn(process.execPath, [__filename, '--writer', db], { stdio: 'inherit' });
  await new Promise((r) => setTimeout(r, 500)); // let the writer get going

  const times = new Float64Array(samples);
  let misses = 0;
  for (let n = 0; n < samples; n++) {
    const j = n % keys.length;
    const t0 = process.hrtime.bigint();
    const hit = store.peekReplay(keys[j], fps[j]);
    times[n] = Number(process.hrtime.bigint() - t0) / 1000;
    if (hit === null) misses++;
  }
  child?.kill('SIGKILL');
  const sorted = Array.from(times).sort((a, b) => a - b);
  const q = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))].toFixed(1);
  const written = (await store.listRecords()).length - 1000;
  console.log(
    `peekReplay ${quiet ? 'alone' : `while another process wrote ${written} records`}: ${samples} reads, ` +
      `p50 ${q(0.5)} µs, p99 ${q(0.99)} µs, p99.9 ${q(0.999)} µs, max ${sorted[sorted.length - 1].toFixed(1)} µs; ` +
      `${misses} answered null (would take the async path)`,
  );
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}

if (process.argv[2] === '--writer') writer(process.argv[3]);
else main();
