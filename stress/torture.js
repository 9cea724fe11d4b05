#!/usr/bin/env node
// Torture run: 8 processes call the same keys for a fixed time, mixing onDuplicate
// 'raise', 'block' and 'retry', while this script SIGKILLs random workers and starts new
// ones. At the end it checks every key's side-effect log against the store and prints a
// one-line verdict.
//
//   node stress/torture.js [--store sqlite|redis|postgres] [--seconds 600] [--workers 8]
//                          [--keys 40] [--lanes 16] [--redis redis://127.0.0.1:6379/15]
//                          [--postgres postgres://postgres@127.0.0.1:5432/postgres] [--table T]
//
// On Postgres each run has a table of its own (--table, default `torture_<pid>_<time>`);
// its records are cleared at the end like every store's, and the empty table stays.
//
// What the verdict checks, from the log and the store:
// - No call that starts after a completion of its key was recorded ever runs. (A call that
//   started earlier may still run after it, when its claim was superseded by a 'retry' or
//   a takeover: its own completion is then refused.) A completion's time is its "recorded"
//   log line; when a worker was killed between its commit and that line, the store's final
//   record names the execution, and the kill (logged by this conductor) bounds its commit.
// - Every duplicate execution of a key is explained: by a 'retry' call (it runs again by
//   design), by a worker killed between its side effect and its record (the documented
//   window; the kill is in the log), or by an owner whose lease ran out while it was alive
//   (its late completion refused: "lost" in the log). Any other duplicate fails the run.
// - Every worker ends by our SIGKILL or exits 0 with nothing on stderr: a worker that
//   crashes from a bug fails the run (its stderr is shown).
// - Every key ends completed, and no call met an unexpected error.
//
// Internal, for the tests of this verdict: --inject-crash makes one worker crash (exit 3
// with a stack on stderr); --verify LOG [--finals F.json] checks a kept or made-up log.

const { spawn } = require('node:child_process');
const { appendFileSync, mkdtempSync, readFileSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { parseArgs } = require('node:util');

const { eachLine } = require('./faults/ledger');

const ROOT = join(__dirname, '..');
const lib = require(ROOT);

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'sqlite' },
    seconds: { type: 'string', default: '600' },
    workers: { type: 'string', default: '8' },
    keys: { type: 'string', default: '40' },
    // Calls in flight per worker. Many (a few hundred) make each turn of a worker's event
    // loop send its claims and settles as large batches, so batches of two processes meet
    // on the same rows. (The PostgreSQL lock-order deadlock that such batches could hit
    // was rare enough that 60 s at 200 lanes did not meet it: its test in
    // src/postgres/tests.rs builds the cycle on purpose.)
    lanes: { type: 'string', default: '16' },
    redis: { type: 'string', default: process.env.REDIS_URL || 'redis://127.0.0.1:6379/15' },
    postgres: { type: 'string', default: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres' },
    table: { type: 'string' },
    worker: { type: 'string' }, // internal: run as a worker with this JSON config
    verify: { type: 'string' }, // check a kept log again: node stress/torture.js --verify effects.log
    finals: { type: 'string' }, // with --verify: the final records, {key: {by, attempt}} (JSON file)
    'inject-crash': { type: 'boolean' }, // internal: one worker crashes, as a bug would
  },
});

const MODES = ['raise', 'block', 'retry'];
const STORES = ['sqlite', 'redis', 'postgres'];

function openStore(config) {
  switch (config.store) {
    case 'redis':
      return new lib.RedisStore({ url: config.redis, prefix: config.prefix });
    case 'postgres':
      return new lib.PostgresStore({ url: config.postgres, table: config.table });
    default:
      return new lib.SqliteStore({ path: config.db });
  }
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
    onEvent: (e) => {
      if (e.type === 'executed') log(`recorded ${e.key} ${process.pid}`);
      if (e.type === 'lease-lost') log(`lost ${e.key} ${process.pid}`);
    },
  })]));
  if (config.crash) setTimeout(() => { throw new Error('injected crash (--inject-crash)'); }, 200);
  const stopAt = Date.now() + config.ms;
  let attempt = 0;
  const lanes = Array.from({ length: config.lanes }, async () => {
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

// ---- the verdict
const START = /^start (g\d+-k\d+) (\d+) (raise|block|retry|final) (\S+)$/;
const EFFECT = /^effect (g\d+-k\d+) (\d+) (raise|block|retry|final) (\S+)$/;
const RECORDED = /^recorded (g\d+-k\d+) (\d+)$/;
const LOST = /^lost (g\d+-k\d+) (\d+)$/;
const KILLED = /^killed (\d+)$/;

/**
 * Checks the log. `finals`: the store's final records, key -> { by, attempt } (the result
 * of the execution whose completion stands), to find commits whose log line a kill ate.
 */
function verify(file, finals) {
  const executions = new Map(); // key -> [{ at, started, pid, mode, id }]
  const firstRecord = new Map(); // key -> line number of its first "recorded" line
  const recorded = new Map(); // `${key} ${pid}` -> how many "recorded" lines
  const lost = new Map(); // key -> how many "lost" lines
  const killedAt = new Map(); // pid -> line number of its kill
  // Where each call started: per worker pid, line numbers indexed by its attempt id (dense
  // from 1); the conductor's final pass by key. Tens of millions of calls fit in arrays.
  const starts = new Map();
  const finalStarts = new Map();
  const startOf = (key, pid, mode, id) => {
    if (mode === 'final') return finalStarts.get(key);
    return starts.get(pid)?.[Number(id)];
  };
  const bump = (map, k) => map.set(k, (map.get(k) ?? 0) + 1);
  const out = {
    executions: 0, duplicates: 0, byRetry: 0, afterKill: 0, afterLeaseLoss: 0, unexplained: 0,
    violations: 0, hiddenCommits: 0, errors: 0, torn: 0, keysRun: 0, firstError: [],
  };
  const report = (text) => { if (out.firstError.length < 5) out.firstError.push(text); };
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
      bump(recorded, `${m[1]} ${m[2]}`);
    } else if ((m = LOST.exec(line))) {
      bump(lost, m[1]);
    } else if ((m = KILLED.exec(line))) {
      killedAt.set(m[1], at);
    } else if ((m = EFFECT.exec(line))) {
      const list = executions.get(m[1]) ?? [];
      executions.set(m[1], list);
      const started = startOf(m[1], m[2], m[3], m[4]);
      list.push({ at, started, pid: m[2], mode: m[3], id: m[4] });
      const record = firstRecord.get(m[1]);
      if (record !== undefined && started !== undefined && started > record) {
        out.violations++; // started after its key's completion was recorded, and still ran
        report(`ran after a record: ${line}`);
      }
    } else if (line.startsWith('error ')) {
      out.errors++;
      report(line);
    } else {
      out.torn++; // a worker SIGKILLed while appending its line
    }
  });

  for (const [key, list] of executions) {
    out.executions += list.length;
    // A commit whose "recorded" line a kill ate: the store's final record names it, and its
    // worker's kill bounds when it was committed. Calls that started after that and ran
    // are violations, as above.
    const final = finals?.[key];
    if (final !== undefined && !recorded.has(`${key} ${final.by}`)) {
      const killed = killedAt.get(String(final.by));
      if (killed === undefined) {
        out.errors++;
        report(`${key}: the stored completion (pid ${final.by}) has no "recorded" line and its worker was not killed`);
      } else {
        out.hiddenCommits++;
        const bound = Math.min(killed, firstRecord.get(key) ?? Infinity);
        for (const e of list) {
          if (e.started !== undefined && e.started > bound && e.at > bound) {
            out.violations++;
            report(`ran after a commit hidden by a kill: ${key} ${e.pid} ${e.mode} ${e.id}`);
          }
        }
      }
    }
    // Every duplicate needs a cause. Credits: executions by killed workers that were
    // neither recorded nor refused (their claims were taken over after the lease), and
    // refused completions ("lost": the owner was alive, its lease had run out).
    let killCredits = 0;
    const byPid = new Map();
    for (const e of list) byPid.set(e.pid, (byPid.get(e.pid) ?? 0) + 1);
    for (const [pid, n] of byPid) {
      if (killedAt.has(pid)) killCredits += Math.max(0, n - (recorded.get(`${key} ${pid}`) ?? 0));
    }
    let lostCredits = lost.get(key) ?? 0;
    for (const e of list.slice(1)) {
      out.duplicates++;
      if (e.mode === 'retry') out.byRetry++;
      else if (killCredits > 0) { killCredits--; out.afterKill++; }
      else if (lostCredits > 0) { lostCredits--; out.afterLeaseLoss++; }
      else {
        out.unexplained++;
        report(`a duplicate with no retry, kill or lost lease to explain it: ${key} ${e.pid} ${e.mode} ${e.id}`);
      }
    }
  }
  out.keysRun = executions.size;
  return out;
}

// ---- the conductor
async function main() {
  if (!STORES.includes(values.store)) throw new Error(`--store must be ${STORES.join(', ')}, not "${values.store}"`);
  const seconds = Number(values.seconds);
  const workers = Number(values.workers);
  const keys = Number(values.keys);
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-torture-'));
  const config = {
    store: values.store,
    db: join(dir, 'store.db'),
    redis: values.redis,
    postgres: values.postgres,
    table: values.table ?? `torture_${process.pid}_${Date.now()}`,
    prefix: `torture:${process.pid}:${Date.now()}:`,
    log: join(dir, 'effects.log'),
    keys,
    lanes: Number(values.lanes),
    startedAt: Date.now(),
    rotateMs: 5000,
  };
  const deadline = Date.now() + seconds * 1000;
  let kills = 0;
  let started = 0;
  const live = new Set();
  const killedByUs = new Set();
  const exits = []; // one promise per worker: how it ended
  const crashes = []; // workers that ended any other way than our SIGKILL or a clean exit

  const startWorker = () => {
    const ms = Math.max(0, deadline - Date.now());
    const crash = values['inject-crash'] === true && started === 0;
    const child = spawn(process.execPath, [__filename, '--worker', JSON.stringify({ ...config, ms, crash })], {
      stdio: ['ignore', 'inherit', 'pipe'],
    });
    child.spawnedAt = Date.now();
    child.crashing = crash; // left alone, so that its crash is what ends it
    started++;
    live.add(child);
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    exits.push(new Promise((resolve) => child.on('close', (code, signal) => {
      live.delete(child);
      const ours = signal === 'SIGKILL' && killedByUs.has(child);
      if (!(ours || (code === 0 && signal === null)) || stderr !== '') {
        crashes.push(`worker ${child.pid}: exit ${code ?? signal}${stderr ? `, stderr: ${stderr.trim().split('\n').slice(0, 3).join(' | ')}` : ''}`);
      }
      resolve();
    })));
    return child;
  };
  for (let i = 0; i < workers; i++) startWorker();

  // Kill a random worker every now and then, and replace it.
  while (Date.now() < deadline - 300) {
    await new Promise((r) => setTimeout(r, 100 + Math.random() * 400));
    if (Date.now() >= deadline - 300) break;
    // Kill workers that have had time to load and start calling (a kill of a process
    // still starting up tests nothing).
    const victims = [...live].filter((c) => Date.now() - c.spawnedAt > 1000 && !c.crashing);
    const victim = victims[Math.floor(Math.random() * victims.length)];
    if (victim && victim.exitCode === null && victim.signalCode === null) {
      killedByUs.add(victim);
      victim.kill('SIGKILL');
      // Logged after the kill: whatever the victim committed, it committed before this line.
      await new Promise((r) => victim.once('exit', r));
      appendFileSync(config.log, `killed ${victim.pid}\n`);
      kills++;
      startWorker();
    }
  }
  await Promise.all(exits);

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
  const records = await store.listRecords();
  const finals = Object.fromEntries(records.filter((r) => r.status === 'completed' && r.result).map((r) => [r.key, r.result]));
  const v = verify(config.log, finals);
  const { executions, duplicates, byRetry, afterKill, afterLeaseLoss, unexplained, violations, hiddenCommits, errors, torn, firstError } = v;
  const notCompleted = records.filter((r) => r.status !== 'completed').length + (used.length - records.length);
  await store.clear();
  await store.close();
  const clean =
    violations === 0 && unexplained === 0 && notCompleted === 0 && errors === 0 && crashes.length === 0 && v.keysRun === used.length;
  console.log(
    `torture ${values.store}: ${clean ? 'CLEAN' : 'FAILED'}: ${seconds}s, ${started} workers (${kills} killed, ${crashes.length} crashed), ${used.length} keys, ` +
      `${executions} executions, ${duplicates} duplicates before a record (${byRetry} by 'retry', ${afterKill} after a kill, ` +
      `${afterLeaseLoss} after a lease ran out on a live owner, ${unexplained} unexplained), ` +
      `${violations} calls that ran although they started after a recorded completion ` +
      `(${hiddenCommits} commits found through the store, their log line lost to a kill), ${notCompleted} keys not completed, ${errors} unexpected errors` +
      (torn ? ` (${torn} log lines torn by a kill, ignored)` : ''),
  );
  for (const e of [...crashes.slice(0, 3), ...firstError]) console.log(`  ${e}`);
  if (clean && !process.env.TORTURE_KEEP) rmSync(dir, { recursive: true, force: true });
  else console.log(`  kept the log: ${config.log}`);
  process.exitCode = clean ? 0 : 1;
}

if (values.verify) {
  const finals = values.finals ? JSON.parse(readFileSync(values.finals, 'utf8')) : undefined;
  const v = verify(values.verify, finals);
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
