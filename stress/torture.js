#!/usr/bin/env node
// Torture run: 8 processes call the same keys for a fixed time, mixing onDuplicate
// 'raise', 'block' and 'retry', while this script SIGKILLs random workers and starts new
// ones. At the end it checks every key's side-effect log against the store and prints a
// one-line verdict.
//
//   node stress/torture.js [--store sqlite|redis] [--seconds 600] [--workers 8] [--keys 40]
//                          [--redis redis://127.0.0.1:6379/15]
//
// The invariant checked: a call that starts after a completion of its key was recorded
// never runs. (A call that started earlier may still run after it, when its claim was
// superseded by a 'retry' or a takeover: its own completion is then refused.) Duplicates before that are expected and counted by
// cause: a 'retry' call (it runs again by design), or a worker killed between its side
// effect and its record (the documented window).

const { spawn } = require('node:child_process');
const { appendFileSync, closeSync, mkdtempSync, openSync, readSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { parseArgs } = require('node:util');

const ROOT = join(__dirname, '..');
const lib = require(ROOT);

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'sqlite' },
    seconds: { type: 'string', default: '600' },
    workers: { type: 'string', default: '8' },
    keys: { type: 'string', default: '40' },
    redis: { type: 'string', default: process.env.REDIS_URL || 'redis://127.0.0.1:6379/15' },
    worker: { type: 'string' }, // internal: run as a worker with this JSON config
    verify: { type: 'string' }, // check a kept log again: node stress/torture.js --verify effects.log
  },
});

const MODES = ['raise', 'block', 'retry'];

function openStore(config) {
  return config.store === 'redis'
    ? new lib.RedisStore({ url: config.redis, prefix: config.prefix })
    : new lib.SqliteStore({ path: config.db });
}

// ---- a worker: calls random keys in random modes until it is killed or told to stop
async function work(config) {
  const store = openStore(config);
  const log = (line) => appendFileSync(config.log, `${line}\n`);
  const tools = Object.fromEntries(MODES.map((mode) => [mode, lib.idempotent(async function torture(key, attempt) {
    log(`effect ${key} ${process.pid} ${mode} ${attempt}`);
    // Let other calls pile up on this key while it is in flight.
    await new Promise((r) => setTimeout(r, Math.random() * 20));
    return { key, by: process.pid, attempt };
  }, {
    store,
    onDuplicate: mode,
    leaseMs: 500,
    pollIntervalMs: 10,
    pollTimeoutMs: 5000,
    payload: (key) => key, // the attempt number is not part of the call's identity
    onEvent: (e) => { if (e.type === 'executed') log(`recorded ${e.key} ${process.pid}`); },
  })]));
  const stopAt = Date.now() + config.ms;
  let attempt = 0;
  const lanes = Array.from({ length: 16 }, async () => {
    while (Date.now() < stopAt) {
      // The key space moves on every few seconds, so new keys keep being claimed (and
      // raced, and killed) all run long, not only at its start.
      const generation = Math.floor((Date.now() - config.startedAt) / config.rotateMs);
      const key = `g${generation}-k${Math.floor(Math.random() * config.keys)}`;
      const mode = MODES[Math.floor(Math.random() * MODES.length)];
      const id = ++attempt;
      log(`start ${key} ${process.pid} ${mode} ${id}`);
      try {
        await tools[mode].withKey(key)(key, id);
      } catch (err) {
        // LEASE_LOST: a 'retry' took this call's claim over; its result was not recorded (by design).
        if (!(err instanceof lib.DuplicateInFlightError || err instanceof lib.InFlightTimeoutError || err.code === 'LEASE_LOST')) {
          log(`error ${key} ${process.pid} ${err.name}: ${err.message.replace(/\n/g, ' ')}`);
        }
      }
    }
  });
  await Promise.all(lanes);
  await store.close();
}

// ---- the verdict, from the log alone
const START = /^start (g\d+-k\d+) (\d+) (raise|block|retry|final) (\S+)$/;
const EFFECT = /^effect (g\d+-k\d+) (\d+) (raise|block|retry|final) (\S+)$/;
const RECORDED = /^recorded (g\d+-k\d+) (\d+)$/;

/** Calls `fn` with each line of the file, reading it in pieces (a long run's log is GBs). */
function eachLine(file, fn) {
  const fd = openSync(file, 'r');
  const buffer = Buffer.alloc(1 << 20);
  let rest = '';
  try {
    for (;;) {
      const n = readSync(fd, buffer, 0, buffer.length, null);
      if (n === 0) break;
      const lines = (rest + buffer.toString('utf8', 0, n)).split('\n');
      rest = lines.pop();
      for (const line of lines) fn(line);
    }
    if (rest !== '') fn(rest);
  } finally {
    closeSync(fd);
  }
}

function verify(file) {
  const effects = new Map(); // key -> executions
  const firstRecord = new Map(); // key -> line number of its first recorded completion
  // Where each call started: per worker pid, line numbers indexed by its attempt id (dense
  // from 1); the conductor's final pass by key. Tens of millions of calls fit in arrays.
  const starts = new Map();
  const finalStarts = new Map();
  const startOf = (key, pid, mode, id) => {
    if (mode === 'final') return finalStarts.get(key);
    return starts.get(pid)?.[Number(id)];
  };
  const out = { executions: 0, duplicates: 0, byRetry: 0, violations: 0, errors: 0, torn: 0, keysRun: 0, firstError: [] };
  let at = 0;
  eachLine(file, (line) => {
    at++;
    if (line === '') return;
    let m;
    if ((m = START.exec(line))) {
      if (m[3] === 'final') {
        finalStarts.set(m[1], at);
      } else {
        let arr = starts.get(m[2]);
        const id = Number(m[4]);
        if (arr === undefined || arr.length <= id) {
          const grown = new Float64Array(Math.max(1024, (id + 1) * 2));
          if (arr) grown.set(arr);
          starts.set(m[2], (arr = grown));
        }
        arr[id] = at;
      }
    } else if ((m = RECORDED.exec(line))) {
      if (!firstRecord.has(m[1])) firstRecord.set(m[1], at);
    } else if ((m = EFFECT.exec(line))) {
      const n = (effects.get(m[1]) ?? 0) + 1;
      effects.set(m[1], n);
      const started = startOf(m[1], m[2], m[3], m[4]);
      const recorded = firstRecord.get(m[1]);
      if (recorded !== undefined && started !== undefined && started > recorded) {
        out.violations++; // started after its key's completion was recorded, and still ran
        if (out.firstError.length < 3) out.firstError.push(`ran after a record: ${line}`);
      } else if (n > 1 && m[3] === 'retry') out.byRetry++;
    } else if (line.startsWith('error ')) {
      out.errors++;
      if (out.firstError.length < 3) out.firstError.push(line);
    } else {
      out.torn++; // a worker SIGKILLed while appending its line
    }
  });
  out.executions = [...effects.values()].reduce((a, b) => a + b, 0);
  out.duplicates = out.executions - effects.size;
  out.keysRun = effects.size;
  return out;
}

// ---- the conductor
async function main() {
  const seconds = Number(values.seconds);
  const workers = Number(values.workers);
  const keys = Number(values.keys);
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-torture-'));
  const config = {
    store: values.store,
    db: join(dir, 'store.db'),
    redis: values.redis,
    prefix: `torture:${process.pid}:${Date.now()}:`,
    log: join(dir, 'effects.log'),
    keys,
    startedAt: Date.now(),
    rotateMs: 5000,
  };
  const deadline = Date.now() + seconds * 1000;
  let kills = 0;
  let started = 0;
  const live = new Set();

  const startWorker = () => {
    const ms = Math.max(0, deadline - Date.now());
    const child = spawn(process.execPath, [__filename, '--worker', JSON.stringify({ ...config, ms })], { stdio: ['ignore', 'inherit', 'inherit'] });
    started++;
    live.add(child);
    child.on('exit', () => live.delete(child));
    return child;
  };
  for (let i = 0; i < workers; i++) startWorker();

  // Kill a random worker every now and then, and replace it.
  while (Date.now() < deadline - 300) {
    await new Promise((r) => setTimeout(r, 100 + Math.random() * 400));
    if (Date.now() >= deadline - 300) break;
    const victims = [...live];
    const victim = victims[Math.floor(Math.random() * victims.length)];
    if (victim && victim.exitCode === null) {
      victim.kill('SIGKILL');
      kills++;
      startWorker();
    }
  }
  await Promise.all([...live].map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.on('exit', r)))));

  // Settle every key once more (waiting out dead owners' leases), with no kills.
  const store = openStore(config);
  const settle = lib.idempotent(async function torture(key) {
    appendFileSync(config.log, `effect ${key} ${process.pid} final 0\n`);
    return { key, by: process.pid, attempt: 0 };
  }, { store, onDuplicate: 'block', leaseMs: 500, pollIntervalMs: 10, payload: (key) => key,
       onEvent: (e) => { if (e.type === 'executed') appendFileSync(config.log, `recorded ${e.key} ${process.pid}\n`); } });
  const usedSet = new Set();
  eachLine(config.log, (l) => {
    const m = START.exec(l);
    if (m) usedSet.add(m[1]);
  });
  const used = [...usedSet];
  for (const key of used) {
    appendFileSync(config.log, `start ${key} ${process.pid} final 0\n`);
    await settle.withKey(key)(key);
  }

  // ---- the verdict
  const v = verify(config.log);
  const { executions, duplicates, byRetry, violations, errors, torn, firstError } = v;
  const records = await store.listRecords();
  const notCompleted = records.filter((r) => r.status !== 'completed').length + (used.length - records.length);
  await store.clear();
  await store.close();
  const clean = violations === 0 && notCompleted === 0 && errors === 0 && v.keysRun === used.length;
  console.log(
    `torture ${values.store}: ${clean ? 'CLEAN' : 'FAILED'}: ${seconds}s, ${started} workers (${kills} killed), ${used.length} keys, ` +
      `${executions} executions, ${duplicates} duplicates before a record (${byRetry} by 'retry', ${duplicates - byRetry} after kills), ` +
      `${violations} calls that ran although they started after a recorded completion, ${notCompleted} keys not completed, ${errors} unexpected errors` +
      (torn ? ` (${torn} log lines torn by a kill, ignored)` : ''),
  );
  for (const e of firstError) console.log(`  ${e}`);
  if (clean) rmSync(dir, { recursive: true, force: true });
  else console.log(`  kept the log: ${config.log}`);
  process.exitCode = clean ? 0 : 1;
}

if (values.verify) {
  const v = verify(values.verify);
  console.log(JSON.stringify({ ...v, firstError: undefined }), v.firstError);
} else if (values.worker) {
  work(JSON.parse(values.worker)).catch((err) => {
    console.error(`torture worker: ${err.stack}`);
    process.exit(3);
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(2);
  });
}
