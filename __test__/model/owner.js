// A call's owner that the model-based test kills (SIGKILL) inside fn: it claims the key,
// does its steps, optionally its final side effect ("charge"), prints
//   RUNNING <the result it would return>
// and hangs until killed. Every side effect is one JSON line appended (O_APPEND) to
// opts.log, or, for idempotentTx, one row written in the call's transaction, so the
// parent counts what really ran (or, for a transaction, what committed).
// If the call does not reach fn (a replay, a mismatch), it prints DONE <json> or
// ERROR <code> <message> and exits. With opts.pause the parent SIGSTOPs it instead, and
// later resumes it and sends a line on stdin: fn then returns, late, and the call prints
// what its caller got (DONE, or ERROR LEASE_LOST when another call took the key over).
//
//   node owner.js <json options>

const { appendFileSync } = require('node:fs');
const lib = require('../..');

const opts = JSON.parse(process.argv[2]);
const run = `child${process.pid}`;
const argsId = `${opts.order}:${opts.cents}`;

function log(entry) {
  appendFileSync(opts.log, `${JSON.stringify(entry)}\n`);
}

const hang = () => new Promise(() => setInterval(() => {}, 1000));

async function main() {
  let wrapped;
  let close = async () => {};
  const common = { name: opts.name, leaseMs: opts.leaseMs, ...(opts.ttlMs == null ? {} : { ttlMs: opts.ttlMs }) };
  if (opts.target === 'tx') {
    const { Pool } = require('pg');
    const { idempotentTx } = require('../../dist/pg.js');
    const pool = new Pool({ connectionString: opts.pg, max: 2, application_name: opts.appName });
    close = () => pool.end();
    const insert = (client, key, kind) =>
      client.query(`INSERT INTO "${opts.effects}" (ns, key, kind, args_id, run) VALUES ($1, $2, $3, $4, $5)`, [opts.ns, key, kind, argsId, run]);
    wrapped = idempotentTx(async (client, order, cents) => {
      const key = lib.currentKey();
      await insert(client, key, 'body');
      if (opts.charge) await insert(client, key, 'charge');
      console.log(`RUNNING ${JSON.stringify({ key, argsId: `${order}:${cents}`, run, steps: [] })}`);
      await hang();
    }, { pool, table: opts.table, ...common });
  } else {
    const store =
      opts.target === 'sqlite' ? new lib.SqliteStore({ path: opts.db })
        : opts.target === 'redis' ? new lib.RedisStore({ url: opts.redis, prefix: opts.prefix })
          : new lib.PostgresStore({ url: opts.pg, table: opts.table });
    close = () => store.close();
    wrapped = lib.idempotent(async (order, cents) => {
      const key = lib.currentKey();
      log({ key, kind: 'body', argsId, run });
      const steps = [];
      for (let i = 1; i <= opts.steps; i++) {
        const label = `s${i}`;
        steps.push(await lib.step(label, () => {
          log({ key, kind: label, argsId, run });
          return { label, key, argsId, run };
        }));
      }
      if (opts.charge) log({ key, kind: 'charge', argsId, run });
      const result = { key, argsId: `${order}:${cents}`, run, steps };
      console.log(`RUNNING ${JSON.stringify(result)}`);
      if (!opts.pause) await hang();
      // Paused (SIGSTOP) here by the parent, then resumed (SIGCONT) and sent a line: fn finishes late.
      await new Promise((r) => process.stdin.once('data', r));
      log({ key, kind: 'late-charge', argsId, run });
      return result;
    }, { store, ...common });
  }
  try {
    const call = opts.key == null ? wrapped : wrapped.withKey(opts.key);
    const result = await call(opts.order, opts.cents);
    console.log(`DONE ${JSON.stringify(result === undefined ? null : result)}`);
  } catch (err) {
    console.log(`ERROR ${err && err.code ? err.code : err && err.name} ${JSON.stringify(String(err && err.message))}`);
  }
  await close();
  process.exit(0);
}

main().catch((err) => {
  console.log(`ERROR HARNESS ${JSON.stringify(String(err && err.stack))}`);
  process.exit(3);
});
