// Trigger.dev: its engine needs the hosted API (or a container) and cannot run here. A run's
// attempts are played by processes that each run the task's run() in the SDK's mock task
// context (runInMockTaskContext: the ctx the SDK builds, ambient as in a real run), the first
// killed with SIGKILL mid-run, the next with the same run id and the next attempt number, as
// Trigger.dev retries a run whose attempt died.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { check, count, finish, ledgerEntries, scenario, start, tempDir } from './harness.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const dir = tempDir('trigger');
const LEDGER = join(dir, 'ledger.jsonl');
const base = { LEDGER, IDEMPOTENT_TOOLS_DB: join(dir, 'store.db') };

function attempt(task, run, number, payload, die = '') {
  return start(process.execPath, [join(here, 'trigger/attempt.mjs')], { name: `${task} ${run}#${number}`, env: { ...base, TASK: task, RUN: run, ATTEMPT: String(number), PAYLOAD: JSON.stringify(payload), DIE: die } });
}

async function killAndRetry(id, die, line) {
  const first = attempt('pay', `run_${id}`, 1, { id }, die);
  await first.waitFor(new RegExp(`^${line}$`));
  await first.kill('SIGKILL');
  const second = attempt('pay', `run_${id}`, 2, { id });
  const [, result] = await second.waitFor(/^result (.*)$/);
  return JSON.parse(result);
}

await scenario('trigger.dev', async () => {
  let r = await killAndRetry('o1', 'after-record', 'recorded');
  check(count(LEDGER, 'pkg-o1') === 1, `attempt killed after the side effect's record: the next attempt of the run ran it ${count(LEDGER, 'pkg-o1')} time(s) with the package (want 1); ${JSON.stringify(r[0])}`);

  r = await killAndRetry('o2', 'control', 'charged control');
  check(count(LEDGER, 'control-o2') === 2, `the control (a plain call in run()) killed after its side effect: the next attempt ran it ${count(LEDGER, 'control-o2')} time(s) (want 2)`);
  check(count(LEDGER, 'pkg-o2') === 1, `and in that run the package's call ran ${count(LEDGER, 'pkg-o2')} time(s) (want 1)`);

  r = await killAndRetry('o3', 'in-side-effect', 'charged');
  check(count(LEDGER, 'pkg-o3') === 1 && r[0] === 'reconciled pkg-o3', `killed inside the side effect: the next attempt took the dead claim over after its lease and asked reconcile: ${count(LEDGER, 'pkg-o3')} charge(s) (want 1), ${JSON.stringify(r[0])}`);

  const before = ledgerEntries(LEDGER).length;
  for (const id of ['m1', 'm2']) await attempt('many', `run_${id}`, 1, { id }).waitFor(/^result /);
  const entries = ledgerEntries(LEDGER).slice(before);
  const keys = new Set(entries.map((e) => e.key));
  check(entries.length === 8 && keys.size === 8 && !keys.has(null), `two side effects, a loop of two calls, in two runs: ${entries.length} side effects under ${keys.size} keys (want 8 and 8)`);
});
finish('trigger.dev');
