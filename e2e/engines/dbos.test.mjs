// DBOS end to end on the local PostgreSQL: a workflow's process killed with SIGKILL in a step,
// and DBOS's own recovery (the next launch runs the workflow's unfinished step again).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import pg from 'pg';

import { check, count, finish, ledgerEntries, scenario, start, tempDir } from './harness.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const dir = tempDir('dbos');
const LEDGER = join(dir, 'ledger.jsonl');
const STORE = join(dir, 'store.db');
const DATABASE = `idempotent_tools_e2e_dbos_${process.pid}`;

async function admin(sql) {
  const client = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function app(env) {
  return start(process.execPath, [join(here, 'dbos/app.mjs')], { name: 'dbos-app', env: { LEDGER, STORE, DATABASE, ...env } });
}

/** Starts workflow `flow:id`, kills its process at `line`, launches again: DBOS recovers the workflow; returns its result. */
async function killAndRecover(flowId, die, line) {
  const first = app({ START: flowId, DIE: die });
  await first.waitFor(new RegExp(`^${line}$`));
  await first.kill('SIGKILL');
  const second = app({ WAIT: flowId.replace(':', '-') });
  const [, result] = await second.waitFor(/^result (.*)$/);
  await second.done;
  return JSON.parse(result);
}

await scenario('dbos', async () => {
  await admin(`DROP DATABASE IF EXISTS ${DATABASE}`);

  let r = await killAndRecover('pay:o1', 'after-record', 'recorded');
  check(count(LEDGER, 'pkg-o1') === 1, `killed after the side effect's record, before DBOS recorded the step: recovery ran it ${count(LEDGER, 'pkg-o1')} time(s) with the package (want 1); ${JSON.stringify(r[0])}`);

  r = await killAndRecover('pay:o2', 'control', 'charged control');
  check(count(LEDGER, 'control-o2') === 2, `the control (a plain step) killed after its side effect: recovery ran it ${count(LEDGER, 'control-o2')} time(s) (want 2)`);
  check(count(LEDGER, 'pkg-o2') === 1, `and in that workflow the package's step ran ${count(LEDGER, 'pkg-o2')} time(s) (want 1)`);

  r = await killAndRecover('pay:o3', 'in-side-effect', 'charged');
  check(count(LEDGER, 'pkg-o3') === 1 && r[0] === 'reconciled pkg-o3', `killed inside the side effect: recovery took the dead claim over after its lease and asked reconcile: ${count(LEDGER, 'pkg-o3')} charge(s) (want 1), ${JSON.stringify(r[0])}`);

  const before = ledgerEntries(LEDGER).length;
  for (const id of ['m1', 'm2']) {
    const run = app({ START: `many:${id}` });
    await run.waitFor(/^result /);
    await run.done;
  }
  const entries = ledgerEntries(LEDGER).slice(before);
  const keys = new Set(entries.map((e) => e.key));
  check(entries.length === 12 && keys.size === 12 && !keys.has(null), `two steps, a loop of two steps, a step that charges twice, in two workflows: ${entries.length} side effects under ${keys.size} keys (want 12 and 12)`);
}, async () => {
  await admin(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`).catch(() => {});
});
finish('dbos');
