// What every engine's end-to-end test shares: child processes whose output lines are waited
// for (never a sleep), a ledger file of side effects (one line each, fsynced, so a SIGKILL
// loses none), free ports, and a report line per check.
import { spawn } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, fsyncSync, mkdtempSync, openSync, readFileSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function tempDir(prefix) {
  return mkdtempSync(join(tmpdir(), `engines-${prefix}-`));
}

/** Appends one side effect to the ledger, durably: what a payment provider would have seen. */
export function recordSideEffect(ledger, entry) {
  const fd = openSync(ledger, 'a');
  try {
    writeSync(fd, `${JSON.stringify(entry)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export function ledgerEntries(ledger) {
  if (!existsSync(ledger)) return [];
  return readFileSync(ledger, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

export function count(ledger, label) {
  return ledgerEntries(ledger).filter((e) => e.label === label).length;
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A child process whose stdout/stderr lines can be awaited. */
export function start(command, args, { env = {}, cwd, name = command, quiet = true } = {}) {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines = [];
  const waiters = [];
  let exited = null;
  const onLine = (line) => {
    lines.push(line);
    if (!quiet || process.env.ENGINES_VERBOSE) console.log(`     [${name}] ${line}`);
    for (const w of [...waiters]) {
      const m = w.pattern.exec(line);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  for (const stream of [child.stdout, child.stderr]) {
    let buffered = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk) => {
      buffered += chunk;
      let i;
      while ((i = buffered.indexOf('\n')) >= 0) {
        onLine(buffered.slice(0, i));
        buffered = buffered.slice(i + 1);
      }
    });
  }
  const done = new Promise((resolve) => child.on('exit', (code, signal) => {
    exited = { code, signal };
    for (const w of waiters.splice(0)) w.reject(new Error(`${name} exited (${code ?? signal}) before printing ${w.pattern}; its last lines:\n${lines.slice(-30).join('\n')}`));
    resolve(exited);
  }));
  return {
    child,
    lines,
    done,
    /** Resolves with the match of the first line (already printed or to come) that matches. */
    waitFor(pattern, timeoutMs = 120_000) {
      for (const line of lines) {
        const m = pattern.exec(line);
        if (m) return Promise.resolve(m);
      }
      if (exited) return Promise.reject(new Error(`${name} had exited (${exited.code ?? exited.signal}) without printing ${pattern}; its last lines:\n${lines.slice(-30).join('\n')}`));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1);
          reject(new Error(`${name} printed no line matching ${pattern} within ${timeoutMs} ms; its last lines:\n${lines.slice(-30).join('\n')}`));
        }, timeoutMs);
        const w = { pattern, resolve: (m) => { clearTimeout(timer); resolve(m); }, reject: (e) => { clearTimeout(timer); reject(e); } };
        waiters.push(w);
      });
    },
    kill(signal = 'SIGKILL') {
      if (!exited) child.kill(signal);
      return done;
    },
  };
}

let passed = 0;
let failed = 0;
/** One check: prints ok/FAIL with what was seen. */
export function check(ok, what) {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  return ok;
}

/** Ends the script: the counts, and the exit code. */
export function finish(engine) {
  console.log(`${engine}: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

/** Runs `body`; an exception is a failed check (with its stack), and the cleanup always runs. */
export async function scenario(what, body, cleanup = async () => {}) {
  try {
    await body();
  } catch (err) {
    check(false, `${what}: ${err?.stack ?? err}`);
  } finally {
    await cleanup();
  }
}

export { appendFileSync, join };
