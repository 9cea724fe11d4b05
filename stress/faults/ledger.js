'use strict';
// The ground truth of a fault run: one JSON line per event, appended by each process to
// its own file in one folder (no interleaving between processes), read back together by
// the checker.
//
// Times (`t`, `sent`) are milliseconds on one clock shared by every process of the
// machine: process.hrtime.bigint() is libuv's uv_hrtime, clock_gettime(CLOCK_MONOTONIC)
// on Linux, counted from boot for the whole system (not per process), so two processes'
// times compare. It never steps, and it keeps running while a process is SIGSTOPped.
//
// What each kind of line says (the writer adds `t`, when it was written; `who`, the
// process that wrote it):
//   call     {call, key, mode, reconcile, leaseMs}    a caller is about to call (sent = t)
//   acquire  {call, key, sent, acquired, takenOver?, attempts?, token?, status?, run?}
//            the store answered a claim (run: the result run of a completed record)
//   acquire-error {call, key, sent, message}
//   renew    {call, key, sent, token, leaseMs, held | error}
//   settle   {call, key, op, sent, token, run?, ok | error}   a complete/fail's answer
//   run      {call, key, run}      the side effect itself (fsync'd before fn goes on)
//   run-end  {call, key, run, threw}  fn is about to return (or throw), fsync'd
//   reconcile {call, key, happened, run?}
//   ret      {call, key, run}      the caller got a result (the run that made it)
//   err      {call, key, name, code, message, run?}  the caller got an error (run: the
//            LeaseLostError's own run, from error.result)
// and the conductor's: worker-start {worker, pid}, worker-exit {worker, code, signal,
// ours}, kill/stop/cont {worker}, epoch {why}, fault {what}, worker-hung {worker}.

const { closeSync, fsyncSync, openSync, readSync, readdirSync, writeSync } = require('node:fs');
const { join } = require('node:path');

/** Now, in ms, on the machine-wide monotonic clock (see above). */
function now() {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}

class Ledger {
  /** Appends to `<dir>/<who>.jsonl`. */
  constructor(dir, who) {
    this.who = who;
    this.fd = openSync(join(dir, `${who}.jsonl`), 'a');
  }

  /**
   * Writes one line. `durable`: fsync'd before this returns, as the side effect's own
   * lines are (a ledger that a crash could lose would prove nothing).
   */
  write(entry, { durable = false } = {}) {
    const line = `${JSON.stringify({ t: now(), who: this.who, ...entry })}\n`;
    writeSync(this.fd, line);
    if (durable) fsyncSync(this.fd);
  }

  close() {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}

/** Calls `fn` with each line of the file, reading it in pieces (a long run's log is large). */
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

/**
 * Every line of every file in `dir`, sorted by time. A line cut short (its writer was
 * SIGKILLed while appending it) is counted in `torn` and left out.
 */
function readLedger(dir) {
  const entries = [];
  let torn = 0;
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.jsonl')).sort()) {
    eachLine(join(dir, name), (line) => {
      if (line === '') return;
      try {
        entries.push(JSON.parse(line));
      } catch {
        torn++;
      }
    });
  }
  entries.sort((a, b) => a.t - b.t);
  return { entries, torn };
}

module.exports = { Ledger, eachLine, now, readLedger };
