#!/usr/bin/env node
'use strict';
/**
 * How promptly 'block' waiters in another process wake when their owners settle, with
 * many keys awaited at once (PostgresStore: LISTEN/NOTIFY, the payload a claim's tag, not
 * its key). A measurement, not a test: it prints numbers and fails only when a waiter
 * ran the function or did not get the owner's result.
 *
 *   node stress/pg-wakeups.js [--url postgres://...] [--keys 10,100,1000] [--rounds 3]
 *
 * For each count of keys: this process holds that many keys (one call each, held on one
 * gate); a child process waits for all of them with onDuplicate 'block' and a poll
 * interval of ten minutes (so only a NOTIFY can wake it); once every claim is marked as
 * awaited, the gate opens. Printed: the time from the gate to the child's last result,
 * the child's wake-ups per key (1 is each waiter woken by its own claim only), and the
 * waiters' wake-up times after the gate (median, 99th percentile, max).
 */

const { spawn } = require('node:child_process');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const lib = require(ROOT);
const { Client } = require('pg');

function args() {
  const o = { url: process.env.IDEMPOTENT_TOOLS_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/test', keys: [10, 100, 1000], rounds: 3 };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    if (a[i] === '--url') o.url = a[i + 1];
    else if (a[i] === '--keys') o.keys = a[i + 1].split(',').map(Number);
    else if (a[i] === '--rounds') o.rounds = Number(a[i + 1]);
    else throw new Error(`unknown argument ${a[i]}`);
  }
  return o;
}

/** The child: waits for every key, prints each result's arrival (ms since the parent's gate, on a shared clock) and the wake-ups. */
const CHILD = `
const lib = require(process.argv[1]);
const { url, table, keys } = JSON.parse(process.argv[2]);
const store = new lib.PostgresStore({ url, table });
const woken = {};
const watch = store.watchSettles.bind(store);
store.watchSettles = (key, onSettled) => watch(key, () => { woken[key] = (woken[key] ?? 0) + 1; onSettled(); });
let waiting = 0;
const call = lib.idempotent(async function held(k) { return { k, by: 'waiter' }; }, {
  store, onDuplicate: 'block', pollIntervalMs: 600000, pollTimeoutMs: 600000,
  onEvent: (e) => { if (e.type === 'in-flight' && ++waiting === keys.length) console.log('WAITING'); },
});
const arrived = [];
Promise.all(keys.map((k) => call.withKey(k)(k).then((r) => { arrived.push(Date.now()); return r; }))).then(async (results) => {
  console.log('DONE ' + JSON.stringify({ arrived, woken, ran: results.filter((r) => r.by !== 'owner').length }));
  await store.close();
});
`;

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function round(url, n) {
  const table = `wakeups_${process.pid}_${n}_${Date.now()}`;
  const store = new lib.PostgresStore({ url, table });
  const keys = Array.from({ length: n }, (_, i) => `k${i}`);
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  const held = lib.idempotent(async function held(k) {
    await gate;
    return { k, by: 'owner' };
  }, { store });
  const owners = keys.map((k) => held.withKey(k)(k));
  const child = spawn(process.execPath, ['-e', CHILD, ROOT, JSON.stringify({ url, table, keys })], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const waiting = new Promise((resolve) => child.stdout.on('data', (d) => ((out += d), /WAITING/.test(out) && resolve())));
  const finished = new Promise((resolve) => child.on('close', resolve));
  await waiting;
  const sql = new Client({ connectionString: url });
  await sql.connect();
  while (Number((await sql.query(`SELECT count(*) AS n FROM "${table}" WHERE watched`)).rows[0].n) < n) await new Promise((r) => setTimeout(r, 5));
  const gateAt = Date.now();
  open();
  await Promise.all(owners);
  await finished;
  const { arrived, woken, ran } = JSON.parse(out.split('DONE ')[1]);
  await sql.query(`DROP TABLE IF EXISTS "${table}"`);
  await sql.end();
  await store.close();
  const after = arrived.map((t) => t - gateAt).sort((a, b) => a - b);
  const wakes = Object.values(woken).reduce((a, b) => a + b, 0);
  return { n, last: after.at(-1), p50: quantile(after, 0.5), p99: quantile(after, 0.99), wakesPerKey: wakes / n, ran };
}

async function main() {
  const o = args();
  let bad = 0;
  console.log('keys  round  last result (ms after the gate)  median  p99  wake-ups per key');
  for (const n of o.keys) {
    for (let r = 1; r <= o.rounds; r++) {
      const m = await round(o.url, n);
      if (m.ran > 0) bad++;
      console.log(`${String(n).padStart(4)}  ${String(r).padStart(5)}  ${String(m.last).padStart(31)}  ${String(m.p50).padStart(6)}  ${String(m.p99).padStart(3)}  ${m.wakesPerKey.toFixed(2)}`);
    }
  }
  if (bad > 0) {
    console.error(`pg-wakeups: a waiter ran the function in ${bad} round(s)`);
    process.exit(1);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
