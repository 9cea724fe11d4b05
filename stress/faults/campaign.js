#!/usr/bin/env node
'use strict';
// A fault campaign: worker processes call a few keys through the library (or, with
// --control naive, through a naive get-then-run-then-set wrapper) while the nemesis
// (nemesis.js) kills and stops them and breaks their store's connections and server; at
// the end the checker (checker.js) reads the ledger and prints one verdict line.
//
//   node stress/faults/campaign.js --store sqlite|redis|redis-tokio|redis-cluster|postgres
//        [--seconds 30] [--seed N] [--workers 4] [--keys 20] [--lanes 4]
//        [--control naive] [--postgres URL] [--keep] [--weight FAULT=N ...]
//
// --weight (repeatable) changes how often the nemesis picks one store fault, for a hunt
// aimed at one kind: `--weight restart-lossy=3` restarts Redis without its data ten times
// as often as the default 0.3; `--weight reset=0` never resets a connection.
//
// The seed is printed first: the same seed repeats the nemesis's choices and the
// workers' (not the machine's timing, so a repeat is close, not exact). Redis runs are on
// a redis-server of the campaign's own (free port, append-only file), and redis-cluster
// on a cluster of its own (three primaries, each behind a proxy of its own that the node
// announces, so redirects and discovered nodes go through the nemesis too); Postgres runs on
// --postgres (default $IDEMPOTENT_TOOLS_TEST_PG, or the tests' server,
// postgres://postgres@127.0.0.1:5432/pg_helper) in a table of their own, dropped at the end.
//
// Exit status: 0 when the run came out as expected (CLEAN; with --control naive: violations
// found), 1 when not, 2 when the harness itself failed. The ledger is kept (its folder is
// printed) when the verdict is not the expected one, or with --keep; check it again with
// `node stress/faults/checker.js <folder>/ledger --finals <folder>/finals.json`.

const { spawn } = require('node:child_process');
const { randomInt } = require('node:crypto');
const { mkdirSync, mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { parseArgs } = require('node:util');

const { FaultProxy, ProxyGroup, createRandom, deriveSeed } = require('./proxy');
const { Ledger, now, readLedger } = require('./ledger');
const { Nemesis, storeFaults } = require('./nemesis');
const { RedisCluster, RedisProcess } = require('./servers');
const { check, details, verdictLine } = require('./checker');

const STORES = ['sqlite', 'redis', 'redis-tokio', 'redis-cluster', 'postgres'];
const ROOT = join(__dirname, '..', '..');

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'sqlite' },
    seconds: { type: 'string', default: '30' },
    seed: { type: 'string' },
    workers: { type: 'string', default: '4' },
    keys: { type: 'string', default: '20' },
    lanes: { type: 'string', default: '4' },
    control: { type: 'string' },
    postgres: { type: 'string', default: process.env.IDEMPOTENT_TOOLS_TEST_PG || 'postgres://postgres@127.0.0.1:5432/pg_helper' },
    keep: { type: 'boolean', default: false },
    weight: { type: 'string', multiple: true, default: [] },
  },
});

function positiveInt(name, text) {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a whole number >= 1, not "${text}"`);
  return n;
}

/** `--weight FAULT=N` options, checked against the faults the store can have. */
function parseWeights(store, given) {
  const known = storeFaults(store);
  const weights = {};
  for (const text of given) {
    const m = /^([a-z-]+)=(\d+(?:\.\d+)?)$/.exec(text);
    if (!m) throw new Error(`--weight takes FAULT=N (such as restart-lossy=3), not "${text}"`);
    if (!(m[1] in known)) {
      throw new Error(`--weight ${m[1]}: --store ${store} has no such fault; its faults are ${Object.keys(known).join(', ') || 'none (no store faults)'}`);
    }
    weights[m[1]] = Number(m[2]);
  }
  return weights;
}

/** What the campaign is doing, for the watchdog's message. */
let phase = 'setting up';

async function main() {
  const store = values.store;
  if (!STORES.includes(store)) throw new Error(`--store must be one of ${STORES.join(', ')}, not "${store}"`);
  if (values.control !== undefined && store === 'redis-cluster') throw new Error('--control naive runs on sqlite, redis or postgres, not redis-cluster');
  if (values.control !== undefined && values.control !== 'naive') throw new Error(`--control takes "naive" (the only control), not "${values.control}"`);
  const seconds = positiveInt('seconds', values.seconds);
  const workerCount = positiveInt('workers', values.workers);
  const keys = positiveInt('keys', values.keys);
  const lanes = positiveInt('lanes', values.lanes);
  const seed = values.seed === undefined ? randomInt(2 ** 31) : Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed must be a whole number >= 0, not "${values.seed}"`);
  const weights = parseWeights(store, values.weight);
  const control = values.control === 'naive';
  const label = `faults ${store}${control ? ' (control: naive)' : ''} seed=${seed}`;
  console.log(`${label}: ${seconds} s, ${workerCount} workers x ${lanes} lanes, ${keys} keys; repeat with: ` +
    `node stress/faults/campaign.js --store ${store} --seed ${seed} --seconds ${seconds} --workers ${workerCount} --keys ${keys} --lanes ${lanes}${control ? ' --control naive' : ''}` +
    values.weight.map((w) => ` --weight ${w}`).join(''));

  // The campaign itself must never hang CI: past its time and a generous margin, it says
  // which phase it was in (and keeps its ledger) and fails.
  const watchdog = setTimeout(() => {
    console.log(`${label}: THE CAMPAIGN HUNG in phase "${phase}" after ${seconds} s of faults; kept: ${dir}`);
    process.exit(1);
  }, (seconds + 150) * 1000);
  watchdog.unref();
  const random = createRandom(seed);
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-faults-'));
  const ledgerDir = join(dir, 'ledger');
  mkdirSync(ledgerDir);
  const ledger = new Ledger(ledgerDir, 'conductor');
  const tag = `${process.pid}_${Date.now()}`;
  const leases = [300, 600, 1000];
  const leaseMaxMs = Math.max(...leases);

  // The server, and the proxy every worker's connections go through.
  let redis;
  let proxy;
  let url;
  let adminPg;
  const table = `faults_${tag}`;
  const application = `idt-faults-${tag}`;
  if (store === 'redis' || store === 'redis-tokio') {
    redis = await RedisProcess.start();
    proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: redis.port }, seed: deriveSeed(seed, 1) });
    url = proxy.url('redis://127.0.0.1:%PORT%/0');
  } else if (store === 'redis-cluster') {
    const ports = [];
    for (let i = 0; i < 3; i++) ports.push(await RedisCluster.freeNodePort());
    const proxies = await Promise.all(ports.map((port, i) => FaultProxy.start({ target: { host: '127.0.0.1', port }, seed: deriveSeed(seed, 10 + i) })));
    proxy = new ProxyGroup(proxies);
    redis = await RedisCluster.start(ports, (i) => proxies[i].port);
    url = redis.url;
  } else if (store === 'postgres') {
    adminPg = values.postgres;
    const u = new URL(adminPg);
    proxy = await FaultProxy.start({ target: { host: u.hostname, port: Number(u.port || 5432) }, seed: deriveSeed(seed, 1) });
    u.port = String(proxy.port);
    u.hostname = '127.0.0.1';
    u.searchParams.set('application_name', application);
    u.searchParams.set('sslmode', 'disable'); // the proxy sees the protocol (its cut-reply fault counts bytes of it)
    url = u.toString();
  }
  const config = {
    store,
    control: control ? 'naive' : undefined,
    dir: ledgerDir,
    db: join(dir, 'store.db'),
    url,
    prefix: `faults:${tag}:`,
    table,
    seed,
    keys,
    lanes,
    leases,
    modes: ['block', 'raise'],
    pollTimeoutMs: 3000,
    connectTimeoutMs: 1000,
    commandTimeoutMs: 1500,
    runMs: [5, 150],
    declineRate: 0.05,
    rotateMs: 1000,
    t0: now(),
  };

  // The store as the conductor sees it (no proxy): makes the Postgres table before the
  // workers race to, and reads the final records.
  const lib = require(ROOT);
  const direct = openDirect(lib, config, redis, adminPg);
  if (store === 'postgres') await direct.get('faults:warm-up');

  // The workers.
  const live = new Set();
  const exits = [];
  let spawned = 0;
  const workers = {
    running: () => [...live],
    spawn() {
      const who = `w${++spawned}`;
      const child = spawn(process.execPath, [join(__dirname, 'worker.js'), JSON.stringify({ ...config, who })], {
        stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
      });
      const w = { who, child, ready: false, stopped: false, killed: false };
      live.add(w);
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      exits.push(new Promise((resolve) => child.on('close', (code, signal) => {
        live.delete(w);
        ledger.write({ ev: 'worker-exit', worker: who, code, signal, ours: w.killed });
        if (!w.killed && (code !== 0 || signal !== null)) {
          ledger.write({ ev: 'worker-crash', worker: who, how: `exit ${code ?? signal}${stderr ? `, stderr: ${stderr.trim().split('\n').slice(0, 4).join(' | ')}` : ''}` });
        }
        resolve();
      })));
      // Killing a worker still loading tests nothing: the nemesis leaves it alone for a second.
      w.readyAt = now() + 1000;
      return w;
    },
    async kill(w) {
      if (w.child.exitCode !== null || w.child.signalCode !== null) return;
      w.killed = true;
      const gone = new Promise((r) => w.child.once('exit', r));
      w.child.kill('SIGKILL');
      await gone;
      // Written after the exit: whatever the victim did, it did before this line.
      ledger.write({ ev: 'kill', worker: w.who });
      workers.spawn();
    },
    stop(w) {
      w.stopped = true;
      w.child.kill('SIGSTOP');
      ledger.write({ ev: 'stop', worker: w.who });
    },
    cont(w) {
      w.child.kill('SIGCONT');
      w.stopped = false;
      ledger.write({ ev: 'cont', worker: w.who });
    },
  };
  for (let i = 0; i < workerCount; i++) workers.spawn();
  const readiness = setInterval(() => {
    for (const w of live) if (!w.ready && now() >= w.readyAt) w.ready = true;
  }, 100);

  const nemesis = new Nemesis({
    random: createRandom(deriveSeed(seed, 2)),
    ledger,
    workers,
    store,
    leaseMaxMs,
    proxy,
    redis,
    postgres: adminPg ? { adminUrl: adminPg, application } : undefined,
    weights,
    clearKey: control ? undefined : (r) => clearKey(direct, ledger, config, r),
  });
  const until = now() + seconds * 1000;
  ledger.write({ ev: 'nemesis-start', until });
  phase = 'faults';
  await nemesis.run(until);
  clearInterval(readiness);

  // Stop: every worker resumed and asked to finish its calls; one that does not exit
  // within the bound is a hang (and is killed).
  phase = 'stopping the workers';
  const hangBoundMs = 25_000;
  for (const w of live) {
    if (w.stopped) workers.cont(w);
    if (w.child.connected) w.child.send('stop');
  }
  const asked = now();
  const waited = await Promise.race([Promise.all(exits).then(() => true), new Promise((r) => setTimeout(() => r(false), hangBoundMs + 5000).unref())]);
  if (!waited) {
    for (const w of [...live]) {
      ledger.write({ ev: 'worker-hung', worker: w.who, waitedMs: now() - asked });
      w.killed = true;
      w.child.kill('SIGKILL');
    }
    await Promise.all(exits);
  }

  // The store's final records, for every key the ledger names.
  phase = 'reading the final records';
  const { entries } = readLedger(ledgerDir);
  const used = [...new Set(entries.filter((e) => e.ev === 'call').map((e) => e.key))];
  const finals = {};
  for (const key of used) {
    const r = await direct.get(key);
    if (r) finals[key] = { status: r.status, run: r.result?.run };
  }
  writeFileSync(join(dir, 'finals.json'), JSON.stringify(finals));
  ledger.close();

  phase = 'checking';
  const { entries: all, torn } = readLedger(ledgerDir);
  const result = check(all, { finals, hangBoundMs });
  // The transport each Redis worker really used (worker.js, usesTokio).
  const told = all.filter((e) => e.ev === 'transport' && e.tokio !== undefined);
  const wrong = told.filter((e) => e.tokio !== (store === 'redis-tokio'));
  if (wrong.length > 0) {
    throw new Error(`--store ${store}: workers ${wrong.map((e) => e.worker).join(', ')} used the ${store === 'redis-tokio' ? 'loop' : 'Tokio'} transport (see tokioRedisStore in worker.js)`);
  }
  // A cluster run proves something only if the client's connections to every node went
  // through that node's proxy (the nodes announce the proxies' ports).
  if (store === 'redis-cluster') {
    const bypassed = proxy.proxies.map((p, i) => (p.accepted === 0 ? i : -1)).filter((i) => i >= 0);
    if (bypassed.length > 0) throw new Error(`--store redis-cluster: no connection went through the proxy of node(s) ${bypassed.join(', ')}: the nemesis never reached them`);
  }
  console.log(verdictLine(label, result) + (torn ? ` (${torn} lines torn by kills, ignored)` : '') + `; workers: ${spawned}`);
  const lines = details(result);
  for (const line of lines) console.log(line);
  console.log(`  nemesis: ${Object.entries(nemesis.counts).map(([k, n]) => `${k} ${n}`).join(', ') || 'nothing'}`);
  const expected = control ? !result.clean : result.clean;
  if (control) console.log(result.clean ? `${label}: CONTROL NOT CAUGHT: the checker found nothing wrong with the naive wrapper` : `${label}: control caught (${result.violations.length} violations, as it must)`);

  phase = 'cleaning up';
  // Bounded, each part: the verdict is in, and a close that waits on something a fault left
  // behind must not hold CI (it is named, so it can be looked into).
  await within(15_000, 'closing the direct store', () => direct.close?.());
  await within(60_000, 'cleaning up', () => cleanUp({ store, direct, redis, proxy, adminPg, table }));
  if (expected && !values.keep) rmSync(dir, { recursive: true, force: true });
  else console.log(`  kept the ledger: ${dir} (node stress/faults/checker.js ${ledgerDir} --finals ${join(dir, 'finals.json')})`);
  return expected ? 0 : 1;
}

/**
 * An operator's clear of one key (workers call with `withKey`, so the record's key is the
 * ledger's). Its epoch line says when the clear was sent
 * (`from`) and is written once it is answered: the deletion happened in between (see
 * checker.js). A clear that failed (the server restarting) may have deleted nothing: a
 * new epoch then only makes the checker lenient.
 */
async function clearKey(direct, ledger, config, random) {
  // A record whose call is running, most often: the case where a lost record bites (the
  // owner settles after another caller claimed the key afresh). Else any current key.
  let key;
  try {
    const pending = (await direct.listRecords({ status: 'pending', limit: 50 })).map((r) => r.key).filter((k) => /^g\d+-k\d+$/.test(k));
    if (pending.length > 0 && random.chance(0.8)) key = random.pick(pending);
  } catch {
    // the server is restarting: a current key, then
  }
  key ??= `g${Math.floor((now() - config.t0) / config.rotateMs)}-k${random.int(0, config.keys - 1)}`;
  const from = now();
  let n;
  try {
    n = await direct.clear(key);
  } catch (err) {
    n = `failed: ${err.message}`;
  }
  ledger.write({ ev: 'epoch', key, from, why: 'cleared by an operator' });
  return { key, n };
}

/** The store (or the naive control's table) straight to the server, for setup and finals. */
function openDirect(lib, config, redis, adminPg) {
  if (config.control === 'naive') {
    const naive = require('./naive');
    if (config.store === 'postgres') return naive.postgresTable(adminPg, `${config.table}_naive`);
    if (redis) return naive.redisTable(redis.url, config.prefix);
    return naive.fileTable(join(config.dir, 'naive-records'));
  }
  switch (config.store) {
    case 'sqlite':
      return new lib.SqliteStore({ path: config.db });
    case 'postgres':
      return new lib.PostgresStore({ url: adminPg, table: config.table, pruneIntervalMs: 0 });
    case 'redis-cluster':
      // Through the proxies (the nodes announce theirs): calm by the time it is used.
      return new lib.RedisStore({ url: redis.url, prefix: config.prefix, cluster: true });
    default:
      return new lib.RedisStore({ url: redis.url, prefix: config.prefix });
  }
}

/** Runs `work`, but gives up on it after `ms` with a note naming `what`. */
async function within(ms, what, work) {
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => {
      console.log(`  note: ${what} took over ${ms / 1000} s; went on without it`);
      resolve();
    }, ms);
  });
  try {
    await Promise.race([Promise.resolve().then(work), late]);
  } finally {
    clearTimeout(timer);
  }
}

async function cleanUp({ store, redis, proxy, adminPg, table }) {
  await proxy?.close();
  await redis?.stop();
  if (store === 'postgres') {
    const { Client } = require('pg');
    // Bounded: a backend a fault left behind could hold a lock on the table for long (a
    // leftover table is harmless; a CI step that waits for it is not).
    const client = new Client({ connectionString: adminPg, connectionTimeoutMillis: 10_000, statement_timeout: 20_000 });
    try {
      await client.connect();
      await client.query("SET lock_timeout = '10s'");
      await client.query(`DROP TABLE IF EXISTS "${table}", "${table}_naive"`);
    } catch (err) {
      console.log(`  note: could not drop the campaign's table ${table}: ${err.message}`);
    } finally {
      await client.end().catch(() => {});
    }
  }
}

main().then(
  (status) => process.exit(status),
  (err) => {
    console.error(`faults campaign: ${err.stack ?? err}`);
    process.exit(2);
  },
);
