#!/usr/bin/env node
'use strict';
/**
 * Processes of an older build of this package (records as Redis hashes, format 1) and of
 * this one (format 2) on one Redis server and one prefix, racing on the same keys: no
 * key's side effect may ever run twice. (src/redis_store/migration_tests.rs checks the
 * same with the older version's own scripts; this runs the older build itself.)
 *
 *   node stress/redis-mixed-versions.js --old DIR [--redis URL] [--keys 300] [--workers 3]
 *
 * DIR is an older build of the package (its dist/ and native/; for example `git worktree
 * add /tmp/old <commit> && cd /tmp/old && npm ci`, or `node bench/compare-builds.js
 * --snapshot DIR` run in such a checkout). Phase 1: older processes alone complete a
 * third of the keys and fail another third (hash records). Phase 2: older and newer
 * processes, started together, call every key (the failed ones again), each call's side
 * effect a line in one log. An older process that meets a record of format 2 fails safe
 * (StoreError, its function does not run): counted, not a failure. Exit code 1 when any
 * key ran twice, or a completed key ran again.
 */

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');

function args() {
  const o = { redis: 'redis://127.0.0.1:6379/13', keys: 300, workers: 3 };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    const v = a[i + 1];
    if (a[i] === '--old') o.old = path.resolve(v);
    else if (a[i] === '--redis') o.redis = v;
    else if (a[i] === '--keys') o.keys = Number(v);
    else if (a[i] === '--workers') o.workers = Number(v);
    else throw new Error(`unknown argument ${a[i]}`);
  }
  if (!o.old) throw new Error('--old DIR (an older build of the package) is required');
  return o;
}

/** One worker process: `node this-file --worker JSON`. */
async function worker(opts) {
  const lib = require(opts.build);
  const store = new lib.RedisStore({ url: opts.redis, prefix: opts.prefix });
  const counts = { ran: 0, replayed: 0, failedByDesign: 0, storeErrors: 0, inFlight: 0, other: 0 };
  const tool = lib.idempotent(
    async function tool(key) {
      fs.appendFileSync(opts.log, `${key} ${opts.version} ${process.pid}\n`);
      counts.ran++;
      await new Promise((r) => setTimeout(r, Math.random() * 10));
      if (opts.failKeys && key % 3 === 1) throw new Error(`planned failure of ${key}`);
      return { key, by: opts.version };
    },
    { store, onDuplicate: 'block', pollIntervalMs: 20, leaseMs: 60_000, key: (k) => `k${k}` },
  );
  const order = opts.keys.slice().sort(() => Math.random() - 0.5);
  await Promise.all(
    Array.from({ length: 8 }, async (_, lane) => {
      for (let i = lane; i < order.length; i += 8) {
        try {
          await tool(order[i]);
          counts.replayed++;
        } catch (err) {
          if (/planned failure/.test(err.message)) counts.failedByDesign++;
          else if (err instanceof lib.StoreError) counts.storeErrors++;
          else if (err instanceof lib.DuplicateInFlightError || err instanceof lib.InFlightTimeoutError) counts.inFlight++;
          else {
            counts.other++;
            console.error(`${opts.version}: ${err.stack}`);
          }
        }
      }
    }),
  );
  await store.close();
  console.log(JSON.stringify(counts));
}

function run(opts) {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [__filename, '--worker', JSON.stringify(opts)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('error', fail);
    child.on('exit', (code) => (code === 0 ? done(JSON.parse(out.trim().split('\n').pop())) : fail(new Error(`${opts.version} worker exited with ${code}`))));
  });
}

async function main() {
  const o = args();
  const prefix = `idt-mixed:${process.pid}:`;
  const log = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'idt-mixed-')), 'effects.log');
  const all = Array.from({ length: o.keys }, (_, i) => i);
  const base = { redis: o.redis, prefix, log };
  // Phase 1: the older version alone, on two thirds of the keys (one third fails).
  const phase1 = all.filter((k) => k % 3 !== 2);
  const p1 = await run({ ...base, build: o.old, version: 'old', keys: phase1, failKeys: true });
  const ranInPhase1 = new Map();
  for (const line of fs.readFileSync(log, 'utf8').split('\n').filter(Boolean)) {
    const key = line.split(' ')[0];
    ranInPhase1.set(key, (ranInPhase1.get(key) ?? 0) + 1);
  }
  // Phase 2: both versions at once, every key.
  const started = Date.now();
  const p2 = await Promise.all(
    Array.from({ length: o.workers * 2 }, (_, i) =>
      run({ ...base, build: i % 2 === 0 ? o.old : ROOT, version: i % 2 === 0 ? 'old' : 'new', keys: all, failKeys: false }),
    ),
  );
  const runs = new Map();
  for (const line of fs.readFileSync(log, 'utf8').split('\n').filter(Boolean)) {
    const [key, version] = line.split(' ');
    const list = runs.get(key) ?? [];
    list.push(version);
    runs.set(key, list);
  }
  // A key that failed in phase 1 runs once more (failed records run again); none other
  // may run twice, and every key must have run.
  const bad = [];
  for (const k of all) {
    const list = runs.get(String(k)) ?? [];
    const allowed = k % 3 === 1 ? 2 : 1;
    if (list.length !== allowed) bad.push(`${k}: ran ${list.length} times (${list.join(', ')}), expected ${allowed}`);
  }
  const sum = (rows, f) => rows.reduce((s, r) => s + r[f], 0);
  const olds = p2.filter((_, i) => i % 2 === 0);
  const news = p2.filter((_, i) => i % 2 === 1);
  const byVersion = (v) => [...runs.values()].flat().filter((x) => x === v).length;
  console.log(
    `redis mixed versions: ${bad.length === 0 ? 'CLEAN' : 'FAILED'}: ${o.keys} keys, phase 1 (older alone) ran ${[...ranInPhase1.values()].reduce((a, b) => a + b, 0)}; ` +
      `phase 2 (${o.workers} older + ${o.workers} newer processes, ${((Date.now() - started) / 1000).toFixed(1)} s): ` +
      `runs by older ${byVersion('old') - p1.ran}, by newer ${byVersion('new')}; older processes' calls that failed safe with StoreError ${sum(olds, 'storeErrors')}, ` +
      `newer ${sum(news, 'storeErrors')}; unexpected errors ${sum(p2, 'other')}; keys run twice ${bad.length}`,
  );
  for (const b of bad.slice(0, 20)) console.log(`  ${b}`);
  process.exitCode = bad.length === 0 && sum(p2, 'other') === 0 ? 0 : 1;
}

if (process.argv[2] === '--worker') worker(JSON.parse(process.argv[3])).catch((e) => { console.error(e); process.exit(1); });
else main().catch((e) => { console.error(e); process.exit(1); });
