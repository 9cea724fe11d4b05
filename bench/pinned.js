#!/usr/bin/env node
'use strict';
/**
 * The Redis scenario with the client and the server each on a core of its own: the
 * picture of a production Redis on another host. On a 2-core machine an unpinned run has
 * the benchmark's process and redis-server fight for the same two cores, so whoever uses
 * less client CPU per call wins by more than it would in production (issue 30).
 *
 *   node bench/pinned.js [--server=PATH] [--quick]
 *
 * Starts a private server (PATH, default `redis-server` on the PATH; IDT_REDIS_SERVER
 * also names one, e.g. the Valkey that .ci/valkey.sh fetches) on the last core with
 * `taskset`, and runs `bench/run.js --only=redis` on core 0 against it. Writes
 * bench/results-pinned.json (bench/results-pinned-<server>.json with --server).
 */

const { spawn, spawnSync } = require('node:child_process');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const { freePort } = require('../stress/faults/servers');

async function waitForPort(port, ms) {
  const until = Date.now() + ms;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => {
        c.end();
        resolve(true);
      });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`the server did not listen on port ${port} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function main() {
  const args = process.argv.slice(2);
  const serverArg = args.find((a) => a.startsWith('--server='));
  const server = serverArg ? path.resolve(serverArg.slice(9)) : process.env.IDT_REDIS_SERVER || 'redis-server';
  const quick = args.includes('--quick');
  const cores = os.availableParallelism ? os.availableParallelism() : os.cpus().length;
  if (cores < 2) throw new Error('a pinned run needs two cores (one for the client, one for the server)');
  if (spawnSync('taskset', ['--version']).error) throw new Error('taskset (util-linux) is not installed');
  const serverCore = String(cores - 1);
  const version = spawnSync(server, ['--version'], { encoding: 'utf8' }).stdout.trim();
  const port = await freePort();
  const child = spawn('taskset', ['-c', serverCore, server, '--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    await waitForPort(port, 10_000);
    const label = serverArg ? `-${path.basename(server).replace(/[^\w.-]/g, '')}` : '';
    const out = path.join(__dirname, `results-pinned${label}.json`);
    console.log(`server: ${version} on core ${serverCore}; client on core 0`);
    const run = spawnSync('taskset', ['-c', '0', process.execPath, path.join(__dirname, 'run.js'), '--only=redis', `--out=${out}`, ...(quick ? ['--quick'] : [])], {
      stdio: 'inherit',
      env: { ...process.env, REDIS_URL: `redis://127.0.0.1:${port}/14` },
    });
    process.exitCode = run.status ?? 1;
  } finally {
    child.kill('SIGTERM');
  }
}

main().catch((err) => {
  console.error(err.message);
  process.exit(1);
});
