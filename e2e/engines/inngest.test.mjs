// Inngest end to end. Its dev server downloads a release when it installs, which cannot
// happen here, so the test plays the executor: it calls the SDK's real endpoint (inngest/node
// serve) as Inngest does, step by step, sending back the steps it recorded; when the endpoint's
// process dies mid-step (SIGKILL), it sends the same request again to a restarted process
// with the next attempt number, as Inngest's retry does. And @inngest/test's engine runs the
// identity cases in process.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { check, count, finish, freePort, ledgerEntries, scenario, start, tempDir } from './harness.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const dir = tempDir('inngest');
const LEDGER = join(dir, 'ledger.jsonl');
process.env.LEDGER = LEDGER;
process.env.IDEMPOTENT_TOOLS_DB = join(dir, 'store.db');
const port = await freePort();

let endpoint;
async function startEndpoint(die = '') {
  endpoint = start(process.execPath, [join(here, 'inngest/serve.mjs')], { name: 'inngest-serve', env: { PORT: String(port), DIE: die, INNGEST_DEV: '1' } });
  await endpoint.waitFor(/^listening/);
}

/**
 * One run of a function, as Inngest's executor drives it: a request per step, each carrying the
 * steps recorded so far; a request that fails (the process died) is sent again with the next
 * attempt, after `onFailure` (which restarts the endpoint).
 */
async function execute(fn, event, runId, onFailure) {
  const steps = {};
  const stack = [];
  let attempt = 0;
  for (let requests = 0; requests < 20; requests++) {
    let res;
    try {
      res = await fetch(`http://127.0.0.1:${port}/api/inngest?fnId=engines-e2e-${fn}&stepId=step`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ version: 2, event, events: [event], steps, ctx: { run_id: runId, attempt, disable_immediate_execution: false, use_api: false, stack: { stack, current: stack.length } } }),
      });
    } catch (err) {
      attempt++;
      await onFailure(err);
      continue;
    }
    const body = await res.json();
    if (res.status === 200) return body;
    if (res.status !== 206) throw new Error(`HTTP ${res.status}: ${JSON.stringify(body)}`);
    for (const op of body) {
      if (op.op !== 'StepRun' || !('data' in op)) throw new Error(`an op this executor does not play: ${JSON.stringify(op)}`);
      steps[op.id] = { type: 'data', data: op.data };
      stack.push(op.id);
    }
    attempt = 0; // the next step's first attempt
  }
  throw new Error('the run did not end within 20 requests');
}

async function killAndRetry(id, die, line) {
  await startEndpoint(die);
  const event = { name: 'order/pay', data: { id }, id: `evt-${id}`, ts: 1 };
  const result = execute('pay', event, `run-${id}`, async () => startEndpoint(''));
  await endpoint.waitFor(new RegExp(`^${line}$`));
  await endpoint.kill('SIGKILL');
  const out = await result;
  await endpoint.kill('SIGTERM');
  return out;
}

await scenario('inngest', async () => {
  let r = await killAndRetry('o1', 'after-record', 'recorded');
  check(count(LEDGER, 'pkg-o1') === 1, `endpoint killed after the side effect's record, before Inngest got the step's result: the retry ran it ${count(LEDGER, 'pkg-o1')} time(s) with the package (want 1); ${JSON.stringify(r[0])}`);

  r = await killAndRetry('o2', 'control', 'charged control');
  check(count(LEDGER, 'control-o2') === 2, `the control (a plain step.run) killed after its side effect: the retry ran it ${count(LEDGER, 'control-o2')} time(s) (want 2)`);
  check(count(LEDGER, 'pkg-o2') === 1, `and in that run the package's step ran ${count(LEDGER, 'pkg-o2')} time(s) (want 1)`);

  r = await killAndRetry('o3', 'in-side-effect', 'charged');
  check(count(LEDGER, 'pkg-o3') === 1 && r[0] === 'reconciled pkg-o3', `killed inside the side effect: the retry took the dead claim over after its lease and asked reconcile: ${count(LEDGER, 'pkg-o3')} charge(s) (want 1), ${JSON.stringify(r[0])}`);

  // @inngest/test: each execute() is a run of its own (a new runId), in this process.
  const { InngestTestEngine } = await import('@inngest/test');
  const { many } = await import('./inngest/functions.mjs');
  const before = ledgerEntries(LEDGER).length;
  for (const id of ['m1', 'm2']) {
    const t = new InngestTestEngine({ function: many, events: [{ name: 'order/many', data: { id } }] });
    const { error } = await t.execute();
    if (error) throw error;
  }
  const entries = ledgerEntries(LEDGER).slice(before);
  const keys = new Set(entries.map((e) => e.key));
  check(entries.length === 10 && keys.size === 10 && !keys.has(null), `(@inngest/test) two steps, a loop of two steps, a step that charges twice, in two runs: ${entries.length} side effects under ${keys.size} keys (want 10 and 10)`);
}, async () => {
  await endpoint?.kill('SIGKILL');
});
finish('inngest');
