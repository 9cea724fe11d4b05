// Restate end to end: the real server (from the npm registry), the real SDK, a service killed
// with SIGKILL mid-invocation and restarted; Restate retries the invocation.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { check, count, finish, freePort, ledgerEntries, scenario, start, tempDir } from './harness.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const dir = tempDir('restate');
const LEDGER = join(dir, 'ledger.jsonl');
const STORE = join(dir, 'store.db');
const [ingress, admin, fabric, servicePort] = [await freePort(), await freePort(), await freePort(), await freePort()];

const server = start(join(here, 'node_modules/@restatedev/restate-server-linux-x64/bin/restate-server'), ['--no-logo'], {
  name: 'restate-server',
  env: {
    RESTATE_BASE_DIR: join(dir, 'restate-data'),
    RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingress}`,
    RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${admin}`,
    RESTATE_BIND_ADDRESS: `127.0.0.1:${fabric}`,
    RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${fabric}`,
    RESTATE_LISTEN_MODE: 'tcp',
    // A dropped connection is retried at once (the default policy's first interval is short too).
    RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL: '100ms',
    RESTATE_LOG_FILTER: 'warn',
  },
});

let service;
function startService(die = '') {
  service = start(process.execPath, [join(here, 'restate/service.mjs')], { name: 'service', env: { LEDGER, STORE, PORT: String(servicePort), DIE: die } });
  return service.waitFor(/^listening/);
}

async function adminReady() {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${admin}/health`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100)); // polling the server's health endpoint until it answers
  }
  throw new Error('the Restate server did not come up');
}

async function call(handler, id) {
  const res = await fetch(`http://127.0.0.1:${ingress}/pay/${handler}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(id) });
  if (!res.ok) throw new Error(`${handler}(${id}): HTTP ${res.status} ${await res.text()}`);
  return res.json();
}

/** Sends the invocation, kills the service at `die` once it gets there, restarts it: Restate's retry finishes the invocation. */
async function killAndRetry(id, die, line) {
  await startService(die);
  const result = call('order', id);
  await service.waitFor(new RegExp(`^${line}$`));
  await service.kill('SIGKILL');
  await startService('');
  return result;
}

await scenario('restate', async () => {
  await adminReady();
  await startService('');
  const reg = await fetch(`http://127.0.0.1:${admin}/deployments`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ uri: `http://127.0.0.1:${servicePort}` }) });
  if (!reg.ok) throw new Error(`registering the service: HTTP ${reg.status} ${await reg.text()}`);
  await service.kill('SIGKILL');

  // 1. Killed after the side effect and its record, before Restate journaled the run: the retry replays it.
  let r = await killAndRetry('o1', 'after-record', 'recorded');
  check(count(LEDGER, 'pkg-o1') === 1, `killed after the record, before Restate's journal: the charge ran ${count(LEDGER, 'pkg-o1')} time(s) with the package (want 1); the retry returned ${JSON.stringify(r[0])}`);
  await service.kill('SIGKILL');

  // 2. The control: a plain ctx.run killed after its side effect runs it again on the retry.
  r = await killAndRetry('o2', 'control', 'charged control');
  check(count(LEDGER, 'control-o2') === 2, `the control (plain ctx.run) killed after its side effect: it ran ${count(LEDGER, 'control-o2')} time(s) (want 2)`);
  check(count(LEDGER, 'pkg-o2') === 1, `and in that invocation the package's run ran ${count(LEDGER, 'pkg-o2')} time(s) (want 1)`);
  await service.kill('SIGKILL');

  // 3. Killed inside the side effect, before its record: the retry takes the dead claim over
  //    after its lease, asks reconcile, which finds the charge by the key it was sent with.
  r = await killAndRetry('o3', 'in-side-effect', 'charged');
  check(count(LEDGER, 'pkg-o3') === 1 && r[0] === 'reconciled pkg-o3', `killed inside the side effect: the retry took the claim over and asked reconcile: ${count(LEDGER, 'pkg-o3')} charge(s) (want 1), result ${JSON.stringify(r[0])}`);

  // 4. Two runs, two iterations of one run, two invocations: five records, five keys.
  const before = ledgerEntries(LEDGER).length;
  await call('many', 'm1');
  await call('many', 'm2');
  const entries = ledgerEntries(LEDGER).slice(before);
  const keys = new Set(entries.map((e) => e.key));
  check(entries.length === 8 && keys.size === 8 && !keys.has(null), `two runs, a loop of two, two invocations: ${entries.length} side effects under ${keys.size} keys (want 8 and 8)`);
}, async () => {
  await service?.kill('SIGKILL');
  await server.kill('SIGTERM');
});
finish('restate');
