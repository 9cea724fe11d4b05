// Vercel Workflow end to end: `workflow build` (standalone), the local world, a node:http
// server killed with SIGKILL in a step; the next server's world re-queues the run and the
// step runs again.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { check, count, finish, freePort, ledgerEntries, scenario, start, tempDir } from './harness.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const app = join(here, 'vercel');
const dir = tempDir('vercel');
const LEDGER = join(dir, 'ledger.jsonl');
const port = await freePort();
const env = {
  LEDGER,
  PORT: String(port),
  WORKFLOW_LOCAL_DATA_DIR: join(dir, 'workflow-data'),
  IDEMPOTENT_TOOLS_DB: join(dir, 'store.db'),
  // The step bundle carries the package's JavaScript; its native binary loads from here (a
  // user's install has the platform package, which the bundle finds in node_modules).
  NAPI_RS_NATIVE_LIBRARY_PATH: process.env.NAPI_RS_NATIVE_LIBRARY_PATH,
};

let server;
async function startServer(die = '') {
  server = start(process.execPath, [join(app, 'server.mjs')], { name: 'vercel-app', cwd: app, env: { ...env, DIE: die } });
  await server.waitFor(/^listening/);
}

async function get(path) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status} ${await res.text()}`);
  return res.json();
}

async function killAndRecover(flow, id, die, line) {
  await startServer(die);
  const { runId } = await get(`/start?flow=${flow}&id=${id}`);
  await server.waitFor(new RegExp(`^${line}$`));
  await server.kill('SIGKILL');
  await startServer('');
  const result = await get(`/result?run=${runId}`);
  await server.kill('SIGTERM');
  return result;
}

await scenario('vercel workflow', async () => {
  rmSync(join(app, '.well-known'), { recursive: true, force: true });
  const build = start(join(here, 'node_modules/.bin/workflow'), ['build'], { name: 'workflow build', cwd: app });
  const built = await build.done;
  if (built.code !== 0) throw new Error(`workflow build failed:\n${build.lines.join('\n')}`);

  let r = await killAndRecover('payFlow', 'o1', 'after-record', 'recorded');
  check(count(LEDGER, 'pkg-o1') === 1, `server killed after the side effect's record, before the workflow recorded the step: the re-queued run ran it ${count(LEDGER, 'pkg-o1')} time(s) with the package (want 1); ${JSON.stringify(r[0])}`);

  r = await killAndRecover('payFlow', 'o2', 'control', 'charged control');
  check(count(LEDGER, 'control-o2') === 2, `the control (a plain step) killed after its side effect: the re-queued run ran it ${count(LEDGER, 'control-o2')} time(s) (want 2)`);
  check(count(LEDGER, 'pkg-o2') === 1, `and in that run the package's step ran ${count(LEDGER, 'pkg-o2')} time(s) (want 1)`);

  r = await killAndRecover('payFlow', 'o3', 'in-side-effect', 'charged');
  check(count(LEDGER, 'pkg-o3') === 1 && r[0] === 'reconciled pkg-o3', `killed inside the side effect: the re-queued step took the dead claim over after its lease and asked reconcile: ${count(LEDGER, 'pkg-o3')} charge(s) (want 1), ${JSON.stringify(r[0])}`);

  await startServer('');
  const before = ledgerEntries(LEDGER).length;
  for (const id of ['m1', 'm2']) {
    const { runId } = await get(`/start?flow=manyFlow&id=${id}`);
    await get(`/result?run=${runId}`);
  }
  const entries = ledgerEntries(LEDGER).slice(before);
  const keys = new Set(entries.map((e) => e.key));
  check(entries.length === 10 && keys.size === 10 && !keys.has(null), `two steps, a loop of two steps, a step that charges twice, in two runs: ${entries.length} side effects under ${keys.size} keys (want 10 and 10)`);
}, async () => {
  await server?.kill('SIGKILL');
});
finish('vercel workflow');
